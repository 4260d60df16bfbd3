"""Specs written by others (Azure ML's examples and SDK tests) load; missing code is a warning."""

import subprocess
from pathlib import Path

import pytest

from distcomp.spec import check_file, load
from tests.conftest import REFERENCE

PEER = sorted((REFERENCE / "peer-specs").glob("*.y*ml"))


def test_peer_specs_are_present() -> None:
    assert len(PEER) == 6


@pytest.mark.parametrize("path", PEER, ids=lambda p: p.name)
def test_peer_spec_loads(path: Path) -> None:
    result = check_file(path)
    assert result.spec is not None, "\n".join(map(str, result.errors))
    for warning in result.warnings:  # only the job files' absent code folder may be flagged
        assert warning.path == "code" and "does not exist" in str(warning)


def test_missing_code_folder_is_a_warning_with_location() -> None:
    path = REFERENCE / "peer-specs" / "azureml-v2-job-pytorch-cifar.yml"
    result = check_file(path)
    assert [str(w) for w in result.warnings] == [
        f"{path}:2:7: code: code folder 'src' does not exist (resolved to {path.parent / 'src'}); "
        "create it before running; compiling does not need it [warning]"
    ]


def test_v1_mpi_example() -> None:
    spec = load(REFERENCE / "peer-specs" / "azureml-v1-distributed-mpi.yaml")
    assert spec.name == "microsoft.com.azureml.samples.mpi_example" and spec.version == "0.0.1"
    assert spec.distribution.launcher == "mpi"
    assert spec.inputs["input_path"].kind == "port" and not spec.inputs["input_path"].optional
    assert spec.inputs["string_parameter"].optional
    assert spec.environment is not None and spec.environment.name == "AzureML-Minimal"
    argv = spec.render({"input_path": "/data"}, {"output_path": "/out"})
    assert argv == ["python", "train.py", "--input-path", "/data", "--output-path", "/out"]
    argv = spec.render({"input_path": "/data", "string_parameter": "x y"}, {"output_path": "/out"})
    assert argv == ["python", "train.py", "--input-path", "/data", "--string-parameter", "x y", "--output-path", "/out"]


def test_v2_pytorch_component_expands_rank_env_late() -> None:
    spec = load(REFERENCE / "peer-specs" / "azureml-v2-component-pytorch.yml")
    assert (spec.distribution.launcher, spec.distribution.nodes, spec.distribution.processes_per_node) == (
        "torch.distributed", 2, 2)
    assert spec.environment is not None and spec.environment.reference.startswith("azureml://registries/")
    env = {"RANK": "3", "LOCAL_RANK": "1", "NODE_RANK": "1", "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500"}
    argv = spec.render({}, {})
    assert argv[:2] == ["/bin/sh", "-c"]  # $RANK is the rank's shell's to fill, as on Azure ML
    out = subprocess.run(argv, capture_output=True, text=True, env=env, check=True).stdout
    assert "RANK: 3" in out and "MASTER_ADDR: 10.0.0.1" in out


def test_v2_tensorflow_component() -> None:
    spec = load(REFERENCE / "peer-specs" / "azureml-v2-component-tensorflow.yml")
    assert spec.name == "TF-hello-world"
    assert (spec.distribution.worker_count, spec.distribution.nodes) == (2, 2)
    assert spec.shell_line({}, {}) == "echo $TF_CONFIG"
    assert subprocess.run(spec.render({}, {}), capture_output=True, text=True, env={"TF_CONFIG": '{"cluster": {}}'},
                          check=True).stdout == '{"cluster": {}}\n'
    assert spec.environment is not None and (spec.environment.name, spec.environment.version) == (
        "AzureML-tensorflow-2.4-ubuntu18.04-py37-cuda11-gpu", "14")


def test_v2_jobs_render_their_literal_inputs() -> None:
    spec = load(REFERENCE / "peer-specs" / "azureml-v2-job-pytorch-cifar.yml")
    assert spec.inputs["cifar"].kind == "port" and spec.inputs["cifar"].default == "azureml:cifar-10-example:1"
    argv = spec.render({n: i.default for n, i in spec.inputs.items()}, {})
    assert argv == ["python", "train.py", "--epochs", "1", "--learning-rate", "0.2", "--data-dir",
                    "azureml:cifar-10-example:1"]
    horovod = load(REFERENCE / "peer-specs" / "azureml-v2-job-horovod-mpi.yml")
    assert (horovod.distribution.launcher, horovod.distribution.processes_per_node) == ("mpi", 2)
