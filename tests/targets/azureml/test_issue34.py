"""Issue 34's Azure ML items, each judged by azure-ai-ml itself (``load_component`` and
``_validate()`` on the file distcomp wrote):

* a relative ``file:`` environment (the public gpu_perf_job.yml) compiles into a new nested
  ``--out`` folder, and the written component still finds its environment file and code;
* a command that starts every rank itself (seed 003's ``mpirun -np 16 ...``) is refused, with
  what to write instead, since Azure ML would start it once per process of its distribution;
* an output's ``mode`` is kept and its ``path`` (which a component's output cannot hold) is
  named in a note.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from ...targets._jobs import clean_env
from .test_component import azure_load

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore:.*:UserWarning:marshmallow")

REPO = Path(__file__).resolve().parents[3]
GPU_PERF = REPO / "tests" / "reference" / "peer-specs" / "gpu_perf"
OWN = REPO / "tests" / "launchers" / "jobs" / "own"


def compile_cli(spec: Path, out: str, cwd: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "distcomp", "compile", "--target", "azureml", str(spec),
                           "--out", out, *flags], cwd=cwd, env=clean_env(), capture_output=True, text=True,
                          timeout=120)


@pytest.fixture
def gpu_perf(tmp_path: Path) -> Path:
    """The public job, with the code folder and Docker context it names (not copied in)."""
    job = tmp_path / "job"
    shutil.copytree(GPU_PERF, job)
    (job / "src").mkdir()
    (job / "src" / "gpu_perf.sh").write_text("nvidia-smi\n")
    (job / "environments" / "azureml" / "Dockerfile").write_text("FROM mcr.microsoft.com/azureml/openmpi4.1.0-ubuntu22.04\n")
    return job / "gpu_perf_job.yml"


@pytest.mark.slow
@pytest.mark.parametrize("where", ["spec folder", "elsewhere"])
def test_a_relative_file_environment_compiles_into_a_new_nested_folder(gpu_perf: Path, tmp_path: Path,
                                                                       where: str) -> None:
    cwd = gpu_perf.parent if where == "spec folder" else tmp_path
    proc = compile_cli(gpu_perf, "new/nested/dir/component.yml", cwd)
    assert proc.returncode == 0, proc.stderr  # before: azure-ai-ml refused, "No such file or directory"
    out = cwd / "new" / "nested" / "dir" / "component.yml"
    written = yaml.safe_load(out.read_text())
    env_file = written["environment"].removeprefix("file:")
    assert (out.parent / env_file).resolve() == (gpu_perf.parent / "environments" / "azureml" / "env.yml").resolve()
    assert (out.parent / written["code"]).resolve() == (gpu_perf.parent / "src").resolve()
    component = azure_load(out)  # azure-ai-ml loads the file where it lies, and validates it
    assert component.distribution.type == "mpi"


@pytest.mark.slow
def test_the_written_component_is_the_same_wherever_it_is_loaded_from(gpu_perf: Path, tmp_path: Path) -> None:
    """azure-ai-ml reads the file's paths from the file's folder, whatever the current folder."""
    proc = compile_cli(gpu_perf, str(tmp_path / "a" / "b" / "c.yml"), gpu_perf.parent)
    assert proc.returncode == 0, proc.stderr
    check = ("from azure.ai.ml import load_component; import sys; c = load_component(sys.argv[1]); "
             "r = c._validate(); assert r.passed, r.error_messages; print('ok')")
    loaded = subprocess.run([sys.executable, "-c", check, str(tmp_path / "a" / "b" / "c.yml")], cwd="/",
                            capture_output=True, text=True, timeout=120, env=clean_env())
    assert loaded.stdout.strip().endswith("ok"), loaded.stderr


SEED_HOROVOD = """command: >-
  horovodrun -np 16 --hostfile $AZUREML_MPI_HOSTFILE python train.py
code:
  path: .
environment:
  docker:
    image: docker.io/pytorch
distributed:
  mpi:
    worker:
      count: 4
compute:
  infrastructure: managed
  instance_type: Standard_NC24
"""


def assert_refused(proc: subprocess.CompletedProcess[str], program: str) -> None:
    assert proc.returncode == 2, proc.stderr  # before: 0, with a note
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert f"with {program}" in lines[0] and "16 time(s)" in lines[0], lines[0]
    assert f"drop {program} and its flags from the command" in lines[0], lines[0]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["seed-mpi-gpus", "seed-mpi-slots", "seed-mpi-k8s"])
def test_a_command_that_brings_its_own_mpirun_is_refused(name: str, tmp_path: Path) -> None:
    proc = compile_cli(OWN / f"{name}.yaml", str(tmp_path / "new" / "c.yml"), tmp_path, "--environment", "azureml:x:1")
    assert_refused(proc, "mpirun")
    assert not (tmp_path / "new").exists()  # nothing written, no folder made


@pytest.mark.slow
def test_a_command_that_brings_its_own_horovodrun_is_refused(tmp_path: Path) -> None:
    (tmp_path / "job.yml").write_text(SEED_HOROVOD)
    (tmp_path / "train.py").write_text("")
    proc = compile_cli(tmp_path / "job.yml", str(tmp_path / "c.yml"), tmp_path)
    assert_refused(proc, "horovodrun")
    assert not (tmp_path / "c.yml").exists()


@pytest.mark.slow
def test_what_the_refusal_says_to_write_runs_the_world_once(tmp_path: Path) -> None:
    """The seed with its mpirun dropped: Azure's mpi distribution starts the 16 ranks itself."""
    data = yaml.safe_load((OWN / "seed-mpi-gpus.yaml").read_text())
    data["command"] = "python mpi_rank.py --out ${{outputs.out}}"
    (tmp_path / "job.yml").write_text(yaml.safe_dump(data))
    shutil.copy(OWN / "mpi_rank.py", tmp_path)
    proc = compile_cli(tmp_path / "job.yml", "c.yml", tmp_path, "--environment", "azureml:x:1")
    assert proc.returncode == 0, proc.stderr
    component = azure_load(tmp_path / "c.yml")
    assert (component.distribution.type, component.distribution.process_count_per_instance,
            component.resources.instance_count) == ("mpi", 4, 4)


def test_the_python_api_refuses_it_too(tmp_path: Path) -> None:
    from distcomp import azureml

    with pytest.raises(azureml.AzureMLTargetError, match="drop mpirun and its flags"):
        azureml.compile_component(OWN / "mpirun.yaml", tmp_path / "c.yml", environment="azureml:x:1")
    assert not (tmp_path / "c.yml").exists()


OUTPUTS = """$schema: https://azuremlschemas.azureedge.net/latest/commandJob.schema.json
type: command
command: python train.py --model ${{outputs.model}} --logs ${{outputs.logs}} --eval ${{outputs.eval}}
code: .
environment: azureml:AzureML-sklearn-1.0-ubuntu20.04-py38-cpu@latest
outputs:
  model:
    type: uri_folder
    path: azureml://datastores/workspaceblobstore/paths/models/run1/
    mode: upload
  logs:
    type: uri_folder
    mode: rw_mount
  eval:
    type: uri_file
    path: azureml://datastores/workspaceblobstore/paths/eval/score.json
"""


@pytest.mark.slow
def test_outputs_keep_their_mode_and_name_their_dropped_path(tmp_path: Path) -> None:
    (tmp_path / "job.yml").write_text(OUTPUTS)
    (tmp_path / "train.py").write_text("")
    proc = compile_cli(tmp_path / "job.yml", "c.yml", tmp_path)
    assert proc.returncode == 0, proc.stderr
    outputs: dict[str, Any] = yaml.safe_load((tmp_path / "c.yml").read_text())["outputs"]
    assert outputs == {"model": {"type": "uri_folder", "mode": "upload"},  # before: no mode
                       "logs": {"type": "uri_folder", "mode": "rw_mount"},
                       "eval": {"type": "uri_file"}}
    said = " ".join(proc.stderr.split())
    for name, path in (("model", "azureml://datastores/workspaceblobstore/paths/models/run1/"),
                       ("eval", "azureml://datastores/workspaceblobstore/paths/eval/score.json")):
        assert f"output '{name}': its path {path} was left out" in said, said  # before: dropped silently
    assert "output 'logs'" not in said
    component = azure_load(tmp_path / "c.yml")
    assert component.outputs["model"].mode == "upload"
