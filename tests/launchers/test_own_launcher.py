"""A command that brings its own launcher (seed 003's job style) runs as Azure ML runs it:
torchrun / torch.distributed.launch once per node with NODE_RANK, MASTER_ADDR and MASTER_PORT,
mpirun once on the first node over AZUREML_MPI_HOSTFILE. Real launchers, real ranks: each
test checks that ONE world of the right size formed (never two worlds, never a launcher in a
launcher), and that the console, status and MLflow tags say what really ran."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from distcomp.core.own import find, problems
from distcomp.spec import loads

from .conftest import JOBS, clean_env

OWN = JOBS / "own"


def run(name: str, tmp_path: Path, *flags: str) -> tuple[subprocess.CompletedProcess[str], list[dict]]:
    env = {**clean_env(), "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'mlflow.db'}"}
    proc = subprocess.run([sys.executable, "-m", "distcomp", "run", str(OWN / f"{name}.yaml"), "--run-dir",
                           str(tmp_path / "run"), "-o", f"out={tmp_path / 'out'}", *flags],
                          capture_output=True, text=True, timeout=240, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc, [json.loads(p.read_text()) for p in sorted((tmp_path / "out").glob("rank*.json"))]


def one_world(records: list[dict], world: int) -> None:
    assert [r["rank"] for r in records] == list(range(world)), records
    assert {(r["world"], r["sum"]) for r in records} == {(world, world * (world + 1) / 2)}


@pytest.mark.slow
def test_torchrun_runs_once_per_node_and_forms_one_world(tmp_path: Path) -> None:
    """The spec says 2 per node and so does torchrun: 4 processes in one world, not 2 x 2 x 2."""
    proc, records = run("torchrun", tmp_path, "--experiment", "own")
    one_world(records, 4)
    assert [(r["group_rank"], r["local_rank"], r["node_rank"]) for r in records] == [
        (0, 0, "0"), (0, 1, "0"), (1, 0, "1"), (1, 1, "1")]
    assert "world size 4 (2 node); the command's own torchrun, once per node" in proc.stderr
    labels = {line.split("]:")[0] + "]" for line in proc.stdout.splitlines() if line.startswith("[")}
    assert labels == {"[node0]", "[node1]"}  # each node's torchrun, not a made-up rank
    status = json.loads((tmp_path / "run" / "status.json").read_text())
    assert [(p["name"], p["returncode"]) for p in status["processes"]] == [("node0", 0), ("node1", 0)]

    from mlflow import MlflowClient

    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    (mlrun,) = client.search_runs([client.get_experiment_by_name("own").experiment_id])
    assert mlrun.data.tags["distcomp.world_size"] == "4"


@pytest.mark.slow
def test_seed_style_torch_distributed_launch(tmp_path: Path) -> None:
    _, records = run("launch", tmp_path, "--no-tracking")
    one_world(records, 4)


@pytest.mark.slow
def test_the_users_mpirun_runs_once_over_every_node(tmp_path: Path) -> None:
    """As root (Azure's images allow it) and over 2 simulated nodes of 2 slots: one world of 4."""
    proc, records = run("mpirun", tmp_path, "--no-tracking")
    one_world(records, 4)
    assert [r["local_rank"] for r in records] == [0, 1, 0, 1]  # 2 slots on each of 2 nodes
    assert "world size 4 (1 launcher); the command's own mpirun, once on the first node" in proc.stderr
    assert "run as root" not in proc.stdout + proc.stderr and "not enough slots" not in proc.stdout


SDK = """
name: t
type: DistributedComponent
launcher:
  type: {launcher}
  node_count: {nodes}
  process_count_per_node: {per_node}
  additional_arguments: {command}
"""


def spec(command: str, nodes: int = 2, per_node: int = 1, launcher: str = "torch.distributed"):  # type: ignore[no-untyped-def]
    return loads(SDK.format(command=json.dumps(command), nodes=nodes, per_node=per_node, launcher=launcher))


@pytest.mark.parametrize("command, expected", [
    ("python train.py --torchrun {inputs.x}", None),
    ("cd src && torchrun --nproc-per-node=4 --nnodes 1:2 train.py", ("torchrun", False, 4, 2, None)),
    ("python3 -m torch.distributed.run --nproc_per_node 2 t.py", ("python -m torch.distributed.run", False, 2, None,
                                                                   None)),
    ("accelerate launch --num_processes 8 --num_machines 2 t.py", ("accelerate launch", False, 4, 2, None)),
    ("deepspeed --num_gpus 2 t.py", ("deepspeed", False, 2, None, None)),
    ("FOO=1 exec /usr/bin/mpirun -n 6 python t.py", ("mpirun", True, None, None, 6)),
    ("pip list; horovodrun -np 16 --hostfile $AZUREML_MPI_HOSTFILE python t.py", ("horovodrun", True, None, None, 16)),
    ("torchrun --nproc-per-node $GPUS t.py", ("torchrun", False, None, None, None)),
])
def test_a_launcher_is_recognised_where_a_command_starts(command: str, expected: tuple | None) -> None:
    found = find(loads(SDK.format(command=json.dumps(command), nodes=1, per_node=1, launcher="mpi")
                       .replace("launcher:\n", "inputs:\n  x: {type: String, default: torchrun}\nlauncher:\n")))
    got = None if found is None else (found.program, found.once, found.processes_per_node, found.nodes,
                                      found.processes)
    assert got == expected


def test_contradictions_with_the_spec_are_named() -> None:
    s = spec("torchrun --nnodes 1 --nproc_per_node=2 train.py", nodes=2, per_node=4)
    found = find(s)
    assert found is not None
    said = problems(s, found)
    assert len(said) == 2 and "--nnodes" in said[0] and "the spec 2" in said[0]
    assert "2 process(es) per node, the spec says 4" in said[1]
    mpi = spec("mpirun -np 8 python t.py", nodes=2, per_node=2, launcher="mpi")
    assert problems(mpi, find(mpi)) == []  # type: ignore[arg-type]  # more ranks than slots: a refusal (test_mpi_slots)
    agree = spec("torchrun --nnodes 2 --nproc_per_node 2 t.py", nodes=2, per_node=2)
    assert problems(agree, find(agree)) == []  # type: ignore[arg-type]


def test_validate_says_what_runs_and_what_contradicts(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(SDK.format(command='"torchrun --nnodes 1 --nproc_per_node=2 t.py"', nodes=2, per_node=4,
                               launcher="torch.distributed"))
    proc = subprocess.run([sys.executable, "-m", "distcomp", "validate", str(path)], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0
    assert proc.stdout == f"{path}: ok: t (torch.distributed, 2 nodes x 2 processes; the command's own torchrun, " \
                          "once per node)\n"
    assert proc.stderr.count(f"{path}: warning: ") == 2 and "--nnodes" in proc.stderr


@pytest.mark.slow
def test_azure_ml_starts_the_users_torch_launcher_once_per_node(tmp_path: Path) -> None:
    """The compiled component, loaded back by azure-ai-ml: one process per instance, the
    command (the user's torchrun with its $NODE_RANK) kept as written."""
    out = tmp_path / "c.yaml"
    proc = subprocess.run([sys.executable, "-m", "distcomp", "compile", "--target", "azureml",
                           str(OWN / "torchrun.yaml"), "--environment", "azureml:x:1", "--out", str(out)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    from azure.ai.ml import load_component

    component = load_component(str(out))
    assert component.distribution.process_count_per_instance == 1 and component.resources.instance_count == 2
    assert component.command.startswith("torchrun --nnodes 2 --nproc-per-node 2 --node-rank $NODE_RANK")


@pytest.mark.slow
def test_azure_ml_compile_refuses_to_wrap_the_users_mpirun_in_its_own(tmp_path: Path) -> None:
    """Azure's mpi distribution would start the user's mpirun once per process (issue 34)."""
    proc = subprocess.run([sys.executable, "-m", "distcomp", "compile", "--target", "azureml",
                           str(OWN / "mpirun.yaml"), "--environment", "azureml:x:1", "--out", str(tmp_path / "c.yaml")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "starts the command under an mpirun of its own 4 time(s)" in " ".join(proc.stderr.split())
    assert not (tmp_path / "c.yaml").exists()
