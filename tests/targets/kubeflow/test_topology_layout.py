"""Every built-in Kubeflow kind is laid out by the job's Topology, not by the spec's nodes x
processes: a plugin launcher lays a 1 x 1 spec out on 2 nodes x 3 processes
(tests/targets/_layout_plugin.py), and each manifest (valid against its CRD) shows 2 x 3. An
MPIJob's Launcher runs the launcher's own mpirun line, placeholders bound for the operator's
pods, which the emulated operator then runs over its hostfile: six real Open MPI ranks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from distcomp.core.plan import make_plan
from distcomp.records import bind
from distcomp.spec import loads
from distcomp.targets.kubeflow import CompileError, compile_job
from distcomp.targets.kubeflow._mpijob import HOSTFILE, PORT

from .._layout_plugin import MPIRUN, NODES, PER_NODE, WORLD, plugins, spec_text, wide_mpi
from ._operator import mpi_on_this_machine, mpijob_pods, rank_records, run_pods
from .test_manifests import replicas, validate

JOBS = Path(__file__).resolve().parent / "jobs"


def compiled(launcher: str, command: str = "python train.py", **kw: Any) -> dict[str, Any]:
    pm = plugins()
    spec = loads(spec_text(launcher, command), launchers=pm.alias_table())
    assert (spec.distribution.nodes, spec.distribution.processes_per_node) == (1, 1)  # what the spec says
    return compile_job(make_plan(spec, gpu=False, pm=pm), {}, {}, pm=pm, image="i:1", name="wide", **kw)


def test_a_pytorchjob_has_a_pod_per_node_of_the_topology() -> None:
    manifest = compiled("wide")
    validate(manifest)
    assert replicas(manifest) == {"Master": 1, "Worker": NODES - 1}
    assert manifest["spec"]["nprocPerNode"] == str(PER_NODE)  # torchrun's --nproc-per-node in each pod


def test_a_trainjob_has_the_topologys_nodes_and_processes() -> None:
    manifest = compiled("wide", trainer_v2=True)
    validate(manifest)
    assert (manifest["spec"]["trainer"]["numNodes"], manifest["spec"]["trainer"]["numProcPerNode"]) == (NODES, PER_NODE)


def test_a_tfjob_has_the_topologys_tasks() -> None:
    manifest = compiled("wide-tf")
    validate(manifest)
    assert replicas(manifest) == {"Worker": 5, "PS": 2}


def test_an_mpijobs_launcher_runs_the_launchers_own_mpirun_bound_for_the_operator() -> None:
    manifest = compiled("wide-mpi", env={"EXTRA": "1"})
    validate(manifest)
    spec = manifest["spec"]
    assert (spec["mpiReplicaSpecs"]["Worker"]["replicas"], spec["slotsPerWorker"]) == (NODES, PER_NODE)
    (launcher,) = spec["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"]
    # the record's words, bound: its hostfile is the operator's, node 0 worker 0's name, its port a fixed one
    values = {"host:0": "wide-worker-0.wide", "port:rdv": str(PORT)}
    at = MPIRUN.index("{{command}}")
    record = [bind(w.replace("{{job_dir}}/hosts", HOSTFILE), values) for w in MPIRUN[:at]]
    command = launcher["command"]
    assert command[:at] == record and command[-2:] == ["python", "train.py"]
    # then a -x for each variable of the job's that the launcher's mpirun does not forward itself
    extra = command[at:-2]
    assert extra[::2] == ["-x"] * (len(extra) // 2) and {"EXTRA", "MLFLOW_DISABLE_TELEMETRY"} <= set(extra[1::2])
    assert "AZ_BATCH_MASTER_NODE" not in extra  # forwarded once, by the launcher's own -x
    env = {e["name"]: e["value"] for e in launcher["env"]}
    assert env["AZ_BATCH_MASTER_NODE"] == f"wide-worker-0.wide:{PORT}"  # the record's env, bound too


@pytest.mark.parametrize("change, message", [
    ({"replicas": "two"}, "lays out 2 processes"),
    ({"hosts": "{{node:0}} slots=3\n{{node:1}} slots=2\n"}, "the same slots"),
    ({"hosts": "{{node:0}} slots=2\n{{node:1}} slots=2\n"}, "starts 6 rank"),
    ({"argv": ("mpirun", "--np", "6", "-x", "A={{restart}}", "{{command}}")}, r"no value for placeholder \{\{restart"),
])
def test_an_mpijob_refuses_a_layout_its_operator_cannot_run(change: dict[str, Any], message: str) -> None:
    from dataclasses import replace

    from distcomp.records import JobOptions
    from distcomp.targets.kubeflow.jobs import mpijob

    spec = loads(spec_text("mpi"))
    t = wide_mpi(spec)
    if "replicas" in change:
        t = replace(t, replicas=(*t.replicas, replace(t.replicas[0], index=1)))
    elif "hosts" in change:
        t = replace(t, files={"hosts": change["hosts"]})
    else:
        t = replace(t, replicas=(replace(t.replicas[0], argv=change["argv"]),))
    with pytest.raises(CompileError, match=message):
        mpijob(spec, JobOptions(name="wide", image="i:1", command=("python", "x.py"), topology=t))


@pytest.mark.slow
def test_the_launchers_own_mpirun_runs_six_ranks_over_the_operators_hostfile(tmp_path: Path) -> None:
    out = tmp_path / "result"
    command = f"python rank.py --world {WORLD} --tag t --out {out}"
    launcher, workers, hostfile = mpijob_pods(compiled("wide-mpi", command))
    assert [line.split()[1] for line in hostfile.splitlines()] == [f"slots={PER_NODE}"] * NODES
    local = mpi_on_this_machine(launcher, workers, hostfile, tmp_path)
    done = run_pods([local], JOBS / "mpijob", tmp_path / "logs", timeout=120)
    assert done.codes == {local.name: 0}, done.explain()
    records = rank_records(out)
    assert sorted(records) == list(range(WORLD)), done.explain()
    assert [records[r]["env"]["OMPI_COMM_WORLD_LOCAL_RANK"] for r in range(WORLD)] == ["0", "1", "2"] * NODES
    # the launcher's own variable reached every rank through its own -x, bound for the pods
    assert {(rec["rank_info"]["master_addr"], rec["rank_info"]["master_port"]) for rec in records.values()} == \
        {("wide-worker-0.wide", PORT)}
