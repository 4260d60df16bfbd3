"""TensorFlow on the real two-node Slurm cluster: one srun task per TF task, TF_CONFIG built in
each task from the allocation (NodeAddr, a port per task), placed as the tensorflow launcher
lays the tasks out; a parameter server is stopped once the chief and workers are done."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import distcomp
from distcomp.records import JobState

from .conftest import JOBS

TF = JOBS / "tensorflow" / "component.yaml"
TF_PS = JOBS / "tensorflow" / "ps.yaml"


def _tasks(outcome: distcomp.JobOutcome) -> dict[str, dict]:  # type: ignore[type-arg]
    folder = Path(outcome.outputs["result"])
    return {p.stem: json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))}


@pytest.mark.slow
def test_two_tf_workers_all_reduce_across_both_nodes(job_dir: Path) -> None:
    """MultiWorkerMirroredStrategy over the TF_CONFIG the tasks built (TF import is slow: one test)."""
    outcome = distcomp.submit(TF, "slurm", nodes=2, job_dir=str(job_dir), tracking=False).wait()
    assert outcome.state is JobState.SUCCEEDED, outcome.root_cause + outcome.message
    tasks = _tasks(outcome)
    assert sorted(tasks) == ["worker-0", "worker-1"]
    # nodeid: the Slurm node of the node agent that started it
    assert [(t["node"], t["nodeid"], t["rank"], t["world"], t["all_reduce"]) for t in tasks.values()] == [
        ("n1", 0, 0, 2, 3.0), ("n2", 1, 1, 2, 3.0)]
    cluster = tasks["worker-0"]["cluster"]
    assert list(cluster) == ["worker"] and len(cluster["worker"]) == 2 and tasks["worker-1"]["cluster"] == cluster


@pytest.mark.slow
def test_parameter_server_placed_and_stopped(job_dir: Path) -> None:
    """Azure ML's layout (no chief: worker 0 leads); the ps shares the first node with worker 0
    (node 0 has 2 tasks: the job asks for 3 tasks, not per node); the ps never ends by itself,
    the job does."""
    outcome = distcomp.submit(TF_PS, "slurm", nodes=2, job_dir=str(job_dir), tracking=False).wait(timeout=120)
    assert outcome.state is JobState.SUCCEEDED, outcome.root_cause + outcome.message
    script = (Path(outcome.details["folder"]) / "job.sbatch").read_text()
    assert "#SBATCH --ntasks=3\n" in script and "--ntasks-per-node" not in script
    tasks = _tasks(outcome)
    # nodeid: the Slurm node of the node agent that started it
    assert {k: (t["node"], t["nodeid"], t["rank"]) for k, t in tasks.items()} == {
        "worker-0": ("n1", 0, 0), "worker-1": ("n2", 1, 1), "ps-0": ("n1", 0, 0)}
    cluster = tasks["worker-0"]["cluster"]
    assert {role: len(members) for role, members in cluster.items()} == {"worker": 2, "ps": 1}
    folder = Path(outcome.details["folder"])
    # the ps was stopped after the others' ends, and counts as done
    ps = json.loads((folder / "exits" / "ps0.json").read_text())
    assert (ps["host"], ps["stopped"], ps["failed"]) == ("n1", True, False)
    assert ps["ended"] >= max(json.loads((folder / "exits" / f"rank{r}.json").read_text())["ended"] for r in range(2))
