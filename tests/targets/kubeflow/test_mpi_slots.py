"""Seed 003's MPI jobs compile to an MPIJob whose slots make the world the user's ``mpirun -np
16`` asks for: 4 Workers x ``slotsPerWorker`` 4 (from ``slots_per``, the worker's GPU limit, or
Standard_NC24's GPUs), valid against the real CRD schema; then the Launcher's mpirun, run as
the mpi-operator runs it (emulated pods, real Open MPI, ranks on CPU), forms that world of 16.
An -np over the slots is refused at compile, as at validate and run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from distcomp.core.plugins import get_plugin_manager
from distcomp.spec import load, loads
from distcomp.targets.kubeflow import compile_job
from distcomp.targets.kubeflow._ranks import rank_pod
from distcomp.errors import UsageError
from distcomp.core.plan import make_plan

from ._operator import mpi_on_this_machine, mpijob_pods, run_pods
from .test_manifests import validate

OWN = Path(__file__).resolve().parents[2] / "launchers" / "jobs" / "own"
SEEDS = ("seed-mpi-gpus", "seed-mpi-k8s", "seed-mpi-slots")


def compiled(name: str, out: Path) -> dict:  # type: ignore[type-arg]
    spec = load(str(OWN / f"{name}.yaml"))
    return compile_job(make_plan(spec, gpu=False, pm=get_plugin_manager()), {}, {"out": str(out)}, pm=get_plugin_manager(), image="test:1")


@pytest.mark.parametrize("name", SEEDS)
def test_the_mpijobs_slots_make_the_users_world(name: str, tmp_path: Path) -> None:
    manifest = compiled(name, tmp_path / "out")
    validate(manifest)  # the mpi-operator's CRD (tests/reference/crds), nothing pruned
    spec = manifest["spec"]
    assert (spec["slotsPerWorker"], spec["mpiReplicaSpecs"]["Worker"]["replicas"]) == (4, 4)  # before: 1 x 4
    rank_pod(manifest, 15)  # rank 15 is in the job's world (the operator's hostfile: 4 x 4 slots)
    with pytest.raises(UsageError, match="has 16 rank"):
        rank_pod(manifest, 16)
    launcher = spec["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]
    line = " ".join(launcher["command"])  # the user's mpirun, as written: -np 16 (or --np 16)
    assert "mpirun -np 16 " in line or "mpirun --np 16 " in line
    worker = spec["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    assert worker["resources"]["limits"]["nvidia.com/gpu"] == 4  # a slot per GPU the pod asks for


@pytest.mark.slow
@pytest.mark.parametrize("name", ["seed-mpi-gpus", "seed-mpi-k8s"])
def test_the_launchers_mpirun_forms_a_world_of_16_over_the_operators_hostfile(name: str, tmp_path: Path) -> None:
    out = tmp_path / "out"
    launcher, workers, hostfile = mpijob_pods(compiled(name, out))
    assert [line.split()[1] for line in hostfile.splitlines()] == ["slots=4"] * 4
    local = mpi_on_this_machine(launcher, workers, hostfile, tmp_path)
    done = run_pods([local], OWN, tmp_path / "logs", timeout=150)
    assert done.codes == {local.name: 0}, done.explain()
    records = [json.loads(p.read_text()) for p in sorted(out.glob("rank*.json"), key=lambda p: int(p.stem[4:]))]
    assert [r["rank"] for r in records] == list(range(16)), done.explain()
    assert {(r["world"], r["sum"]) for r in records} == {(16, 136)}
    assert [r["local_rank"] for r in records] == [0, 1, 2, 3] * 4  # 4 slots on each of the 4 workers


def test_an_np_over_the_slots_is_refused_at_compile() -> None:
    spec = loads("command: mpirun -np 20 python t.py\ndistributed: {mpi: {worker: {count: 4, slots_per: 4}}}\n")
    with pytest.raises(UsageError, match=r"asks for 20 processes \(-np 20\), but the spec's 4 node\(s\) x 4 slot"):
        compile_job(make_plan(spec, gpu=False, pm=get_plugin_manager()), {}, {}, pm=get_plugin_manager(), image="test:1")
