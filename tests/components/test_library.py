"""components/ as a library: every spec valid without a warning, and every component folder
self-contained and publishable by name@version (spec, code, README)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ..launchers.conftest import clean_env
from ._run import COMPONENTS, NAMES

SEMVER = re.compile(r"^\d+\.\d+\.\d+$")


def folders() -> list[Path]:
    return sorted(p.parent for p in COMPONENTS.glob("*/component.yaml"))


def test_every_shipped_component_is_here_and_tested() -> None:
    assert [p.name for p in folders()] == sorted(NAMES)


def test_validate_reports_every_component_ok_without_warnings() -> None:
    proc = subprocess.run([sys.executable, "-m", "distcomp", "validate", str(COMPONENTS)], capture_output=True,
                          text=True, timeout=120, env=clean_env())
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == "", proc.stderr  # warnings and errors go to stderr
    lines = proc.stdout.splitlines()
    assert len(lines) == len(NAMES), proc.stdout
    for name, line in zip(sorted(NAMES), lines):
        assert re.search(rf"/{name}/component\.yaml: ok: {name}@\d+\.\d+\.\d+ \(.*1 node x 2 processes\)$", line), line


@pytest.mark.parametrize("name", NAMES)
def test_component_folder_is_self_contained(name: str) -> None:
    folder = COMPONENTS / name
    doc = yaml.safe_load((folder / "component.yaml").read_text(encoding="utf-8"))
    assert doc["name"] == name == name.lower()
    assert SEMVER.match(str(doc["version"])), doc["version"]
    assert doc["type"] == "DistributedComponent" and doc.get("description", "").strip()
    assert doc["$schema"] == "../../plugin/distcomp/spec/distributed-component.schema.json"
    assert doc["environment"]["docker"]["image"], "an image, so the spec compiles to Azure ML"
    assert doc["launcher"]["process_count_per_node"] == 2

    code = (folder / doc["code"]).resolve()  # the code lives inside the component's folder
    assert code.is_dir() and (code == folder or folder in code.parents), code
    script = doc["launcher"]["additional_arguments"].split()[1]
    assert (code / script).is_file(), f"the command runs {script}, which {code} lacks"

    for key, spec in doc["inputs"].items():
        assert spec.get("description"), f"input {key} has no description"
        if spec["type"] in ("Integer", "Float"):
            assert "min" in spec, f"input {key} has no min"

    readme = (folder / "README.md").read_text(encoding="utf-8")
    assert readme.startswith(f"# {name}\n"), "the README is titled with the component's name"
    assert f"distcomp run components/{name}" in readme, "the README shows how to run it"
    for port in [*doc["inputs"], *doc.get("outputs", {})]:
        assert f"`{port}`" in readme, f"the README's tables leave out {port}"
    assert "MLflow" in readme


def test_library_readme_lists_every_component() -> None:
    text = (COMPONENTS / "README.md").read_text(encoding="utf-8")
    for name in NAMES:
        assert f"[`{name}`]({name}/)" in text and f"distcomp run components/{name}" in text, name
