"""Azure ML spec forms seen in public repositories: a job input without type, a port typed as a
list, DistributedComponent@1-legacy, and a pipeline given where a component is expected.
Where azure-ai-ml decides what a form means, its own loader is asked (azure's verdict on
each corpus file is compared in test_azure_differential.py)."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from distcomp.spec import check_file, detect, json_schema, load, loads
from tests.conftest import CORPUS

logging.getLogger("azure.ai.ml").setLevel(logging.ERROR)
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore:.*:UserWarning:marshmallow")

UNTYPED = CORPUS / "valid" / "v2-job-untyped-inputs.yml"
LEGACY = CORPUS / "valid" / "sdk-legacy-list-ports.yaml"
PIPELINE = CORPUS / "invalid" / "pipeline.yml"


def test_a_job_input_without_type_is_what_azure_makes_of_it() -> None:
    """azure-ai-ml: {path: ...} is an Input of its default type uri_folder, {value: 3} a literal."""
    from azure.ai.ml import load_job

    job = load_job(str(UNTYPED))
    assert job._validate().passed
    theirs = {name: (i.type, getattr(i._data, "path", i._data)) for name, i in job.inputs.items()}
    assert theirs == {"data": ("uri_folder", "mnist:1"), "epochs": ("integer", 3), "name": ("string", "mnist")}
    ours = load(UNTYPED).inputs
    assert {n: (i.type, i.default) for n, i in ours.items()} == {
        "data": ("uri_folder", "azureml:mnist:1"), "epochs": ("integer", 3), "name": ("string", "mnist")}
    assert (ours["data"].kind, ours["data"].holds, ours["epochs"].kind) == ("port", "folder", "parameter")


def test_a_component_input_still_needs_its_type() -> None:
    """azure-ai-ml requires type: on a component's input; the job-only default does not apply."""
    from azure.ai.ml import load_component
    from marshmallow import ValidationError
    from marshmallow.fields import Field

    path = CORPUS / "invalid" / "v2-component-untyped-input.yml"
    with pytest.raises(ValidationError) as info:
        load_component(str(path))
    # marshmallow's words for a missing field, from marshmallow itself (neither it nor azure-ai-ml is pinned)
    said = str(info.value)
    assert Field.default_error_messages["required"] in said and "'type'" in said and '"inputs.data"' in said, said
    (error,) = check_file(path).errors
    assert (error.path, error.message) == ("inputs.data", "missing required key 'type'")
    assert "only a job's input may leave it out, and Azure ML then takes uri_folder" in str(error)


def test_a_literal_input_takes_value_alone() -> None:
    (error,) = check_file(CORPUS / "invalid" / "v2-job-literal-with-keys.yml").errors
    assert error.path == "inputs.epochs.description" and "takes no 'description'" in error.message


def test_ports_typed_as_a_list_and_the_legacy_type() -> None:
    data: dict[str, Any] = {"type": "DistributedComponent@1-legacy", "launcher": {}}
    assert detect(data) == "sdk"
    spec = load(LEGACY)
    data_port, model = spec.inputs["data"], spec.inputs["model"]
    # [AnyFile, AnyDirectory] takes either: the v1 'path' type; a list of folder types is a folder
    assert (data_port.type, data_port.kind, data_port.holds) == ("path", "port", "any")
    assert (model.type, model.holds, model.optional) == ("ModelDirectory", "folder", True)
    assert spec.render({"data": "/d", "epochs": 2}, {"out": "/o"}) == [
        "python", "train.py", "--data", "/d", "--epochs", "2", "--out", "/o"]


@pytest.mark.parametrize("types, message", [
    ("[String, AnyFile]", "inputs.x.type: a list of input types that mixes kinds (expected a list of port types "
                          "such as [AnyFile, AnyDirectory], got String, AnyFile)"),
    ("[AnyFile, AnyFolder]", "inputs.x.type: unknown input type 'AnyFolder' (expected one of: AnyDirectory, AnyFile, "
                             "Boolean, CsvFile, DataDirectory, DataFrameDirectory, Enum, Float, ImageDirectory, "
                             "Integer, ModelDirectory, String, ZipFile, path); did you mean 'AnyFile'?"),
    ("[]", "inputs.x.type: a list of input types that is empty (expected a list of port types such as "
           "[AnyFile, AnyDirectory])"),
])
def test_a_bad_list_of_types_is_named(types: str, message: str) -> None:
    text = (f"name: c\ntype: DistributedComponent\ninputs:\n  x:\n    type: {types}\n"
            "launcher:\n  type: mpi\n  additional_arguments: python t.py\n")
    result = check_file_text(text)
    assert [str(d).split(": ", 1)[1] for d in result.errors] == [message]
    errors = list(jsonschema.Draft202012Validator(json_schema("sdk")).iter_errors(_yaml(text)))
    assert errors, "the JSON Schema accepts what validate refuses"


def test_the_json_schema_takes_the_new_forms() -> None:
    sdk = jsonschema.Draft202012Validator(json_schema("sdk"))
    v2 = jsonschema.Draft202012Validator(json_schema("v2"))
    assert not list(sdk.iter_errors(_yaml(LEGACY.read_text())))
    assert not list(v2.iter_errors(_yaml(UNTYPED.read_text())))
    # without type:, an input may not have a parameter's keys either
    bad = _yaml(UNTYPED.read_text())
    bad["inputs"]["data"]["min"] = 1
    assert list(v2.iter_errors(bad))
    assert check_file_text(_dump(bad), ".yml").errors[0].message == "unknown key 'min'"


def test_a_pipeline_names_its_distributed_steps() -> None:
    (error,) = check_file(PIPELINE).errors
    assert error.message == "this is an Azure ML pipeline, not a component"
    assert error.got == "its distributed steps: jobs.train (pytorch distribution, component ../valid/v2-component.yml)"
    assert "point distcomp at the step's component file (jobs.train.component: ../valid/v2-component.yml" in error.hint
    # and that file is what the hint says: the step's distributed component
    assert load(PIPELINE.parent / "../valid/v2-component.yml").distribution.launcher == "torch.distributed"


def test_a_pipeline_with_inline_or_registered_steps() -> None:
    inline = ("type: pipeline\njobs:\n  train:\n    command: python t.py\n    distribution: {type: mpi}\n"
              "  eval:\n    command: python e.py\n")
    (error,) = check_file_text(inline).errors
    assert error.got == "its distributed steps: jobs.train (mpi distribution, inline command)"
    assert error.hint.startswith("copy the step jobs.train into a file of its own")
    registered = "type: pipeline\njobs:\n  t:\n    component: azureml:train:3\n    distribution: {type: pytorch}\n"
    (error,) = check_file_text(registered).errors
    assert error.hint == "download the registered component of jobs.t (azureml:train:3) and point distcomp at its file"
    plain = "type: pipeline\njobs:\n  a:\n    command: echo a\n"
    (error,) = check_file_text(plain).errors
    assert error.got == "its steps (a) have no distribution:"
    with pytest.raises(Exception, match="this is an Azure ML pipeline"):
        loads(plain)


def test_validate_on_a_pipeline_is_a_user_error() -> None:
    proc = subprocess.run([sys.executable, "-m", "distcomp", "validate", str(PIPELINE)], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "this is an Azure ML pipeline, not a component" in proc.stderr and "jobs.train" in proc.stderr


def check_file_text(text: str, suffix: str = ".yaml") -> Any:
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / f"spec{suffix}"
        path.write_text(text)
        return check_file(path)


def _yaml(text: str) -> Any:
    import yaml

    return yaml.safe_load(text)


def _dump(data: Any) -> str:
    import yaml

    return yaml.safe_dump(data)
