"""A third-party launcher on the real two-node Slurm cluster: the ``mine`` launcher of the
hookspec's own docstring (one process per node with MY_RANK), installed through its entry point
as pip leaves it, runs with ``distcomp submit --target slurm --nodes 2``: its ranks on both
Slurm nodes, one MLflow run for the job, and a failing rank named as the root cause. The slurm
target knows nothing of it: the node agent runs its Topology."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from mlflow import MlflowClient

from .._jobs import clean_env, plugin_job

RANK = '''\
import json, os, sys
from distcomp.runtime import rank_info
rank = int(os.environ["MY_RANK"])
out = sys.argv[1]
info = rank_info()
with open(os.path.join(out, f"rank{rank}.json"), "w") as f:
    json.dump({"rank": rank, "world": os.environ["MY_WORLD"], "node": os.environ["SLURMD_NODENAME"],
               "run_id": os.environ.get("MLFLOW_RUN_ID", ""), "slurm_procid": os.environ.get("SLURM_PROCID"),
               "info": [info.rank, info.world_size, info.node_rank, info.source]}, f)
print(f"rank {rank} of {os.environ['MY_WORLD']} on {os.environ['SLURMD_NODENAME']}", flush=True)
if str(rank) == sys.argv[2]:
    print(f"rank {rank} gives up on purpose", flush=True)
    sys.exit(5)
'''


@pytest.fixture
def mine(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """The spec of a ``launcher: {type: mine}`` job, and an env that finds the installed plugin."""
    spec, site = plugin_job(tmp_path, RANK)
    return spec, clean_env(PYTHONPATH=str(site))


def _submit(spec: Path, env: dict[str, str], job_dir: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "distcomp", "submit", str(spec), "--target", "slurm", "--nodes", "2",
                           "--job-dir", str(job_dir), *flags], cwd=spec.parent.parent, env=env, capture_output=True,
                          text=True, timeout=300)


@pytest.mark.slow
def test_a_plugin_launcher_runs_on_both_slurm_nodes_in_one_mlflow_run(slurm_cluster: Path, tmp_path: Path,
                                                                     mine: tuple[Path, dict[str, str]]) -> None:
    spec, env = mine
    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    proc = _submit(spec, {**env, "MLFLOW_TRACKING_URI": store}, tmp_path / "jobs")
    assert proc.returncode == 0, proc.stderr
    (folder,) = (tmp_path / "jobs").glob("mine-job-*")
    result = folder / "outputs" / "result"
    ranks = [json.loads((result / f"rank{r}.json").read_text()) for r in range(2)]
    assert [(r["rank"], r["world"], r["node"]) for r in ranks] == [(0, "2", "n1"), (1, "2", "n2")]
    # distcomp.runtime places each rank by distcomp's contract; the agent's srun task is not a rank's
    assert [(r["info"], r["slurm_procid"]) for r in ranks] == [([0, 2, 0, "distcomp"], None),
                                                              ([1, 2, 1, "distcomp"], None)]
    assert sorted(p.name for p in (folder / "logs").iterdir()) == ["rank0.log", "rank1.log"]
    assert (folder / "logs" / "rank1.log").read_text() == "rank 1 of 2 on n2\n"
    client = MlflowClient(store)
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
    assert len(runs) == 1
    run = runs[0]
    assert {r["run_id"] for r in ranks} == {run.info.run_id}
    assert run.info.status == "FINISHED" and run.data.tags["distcomp.state"] == "succeeded"
    assert run.data.tags["distcomp.launcher"] == "mine" and run.data.tags["distcomp.world_size"] == "2"
    assert "mine" not in (folder / "job.sbatch").read_text().split("DISTCOMP_NODE_RECORD")[-1]  # no branch on it


@pytest.mark.slow
def test_a_failing_plugin_rank_is_the_root_cause(slurm_cluster: Path, tmp_path: Path,
                                                 mine: tuple[Path, dict[str, str]]) -> None:
    spec, env = mine
    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    proc = _submit(spec, {**env, "MLFLOW_TRACKING_URI": store}, tmp_path / "jobs", "-i", "fail_rank=1")
    assert proc.returncode == 1, proc.stderr
    said = proc.stdout + proc.stderr
    assert ("root cause:\n  rank1 (node n2) exited with code 5\n      rank 1 of 2 on n2\n"
            "      rank 1 gives up on purpose\n") in said, said
    client = MlflowClient(store)
    (run,) = client.search_runs([e.experiment_id for e in client.search_experiments()])
    assert run.info.status == "FAILED" and "rank1 (node n2) exited with code 5" in run.data.tags["distcomp.failure"]
    status = subprocess.run([sys.executable, "-m", "distcomp", "status", proc.stdout.split()[0], "--json"],
                            env={**env, "DISTCOMP_SLURM_DIR": str(tmp_path / "jobs")}, capture_output=True,
                            text=True, timeout=120)
    assert status.returncode == 0 and json.loads(status.stdout)["root_cause"].startswith(
        "rank1 (node n2) exited with code 5"), status.stdout + status.stderr
