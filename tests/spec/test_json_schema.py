"""The JSON Schema comes from the validator's own schema tree: check it with the real
``jsonschema`` library against the same corpus the validator is tested on."""

import json
from pathlib import Path

import jsonschema
import pytest
import yaml

from distcomp.spec import check_file, detect, json_schema
from tests.conftest import CORPUS, REFERENCE, REPO

SHIPPED = REPO / "plugin" / "distcomp" / "spec" / "distributed-component.schema.json"
# Invalid specs whose problem is structural (a key, a type, an enum, a minimum): a JSON
# Schema can see it. The others (template references, default vs type, min > max) cannot.
STRUCTURAL = {"unknown-launcher.yaml", "nonpositive-counts.yaml", "misspelt-keys.yaml", "unknown-input-type.yaml",
              "bad-name.yaml", "many-errors.yaml", "v2-nonpositive-counts.yml",
              "v2-compute-node-count.yml"}


def _validator(dialect: str) -> jsonschema.Draft202012Validator:
    schema = json_schema(dialect)
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def _docs(paths: list[Path]) -> list[tuple[Path, dict, str]]:
    out = []
    for p in paths:
        data = yaml.safe_load(p.read_text())
        out.append((p, data, detect(data)))
    return out


def test_shipped_schema_file_is_current() -> None:
    """Editors read the shipped file; it must be exactly what `distcomp schema` prints."""
    assert json.loads(SHIPPED.read_text()) == json_schema("sdk")


@pytest.mark.parametrize("dialect", ["sdk", "v2", "draft"])
def test_schema_is_valid_json_schema(dialect: str) -> None:
    _validator(dialect)


VALID = _docs(sorted((CORPUS / "valid").glob("*.y*ml")) + sorted((REFERENCE / "peer-specs").glob("*.y*ml")))


@pytest.mark.parametrize("path, data, dialect", VALID, ids=lambda v: v.name if isinstance(v, Path) else "")
def test_valid_specs_pass_the_json_schema(path: Path, data: dict, dialect: str) -> None:
    errors = list(_validator(dialect).iter_errors(data))
    assert not errors, [e.message for e in errors]


INVALID = _docs([CORPUS / "invalid" / name for name in sorted(STRUCTURAL)])


@pytest.mark.parametrize("path, data, dialect", INVALID, ids=lambda v: v.name if isinstance(v, Path) else "")
def test_structural_errors_fail_the_json_schema_too(path: Path, data: dict, dialect: str) -> None:
    assert check_file(path).spec is None
    errors = list(_validator(dialect).iter_errors(data))
    assert errors, f"{path.name} passes the JSON Schema but distcomp rejects it"


def test_launcher_type_is_case_insensitive_in_the_schema() -> None:
    v = _validator("sdk")
    doc = {"name": "x", "type": "distributedcomponent", "launcher": {"type": "PyTorch", "additional_arguments": "t"}}
    assert not list(v.iter_errors(doc))
    doc["launcher"]["type"] = "pytorc"
    assert [e.validator for e in v.iter_errors(doc)] == ["pattern"]
