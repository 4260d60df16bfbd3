"""A third-party launcher on the real two-node Ray cluster: the ``mine`` launcher of the
hookspec's own docstring (one process per node with MY_RANK), installed through its entry point
as pip leaves it, runs with ``distcomp submit --target ray --nodes 2``: a rank on each Ray node,
one MLflow run, and a failing rank as the root cause. The ray target knows nothing of it: the
node agent runs its Topology, which is all the launcher declares."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mlflow import MlflowClient

from .._jobs import plugin_job
from .conftest import distcomp, ray_env

RANK = '''\
import json, os, sys
from distcomp.runtime import rank_info
rank = int(os.environ["MY_RANK"])
info = rank_info()
with open(os.path.join(sys.argv[1], f"rank{rank}.json"), "w") as f:
    json.dump({"rank": rank, "world": os.environ["MY_WORLD"], "node": os.environ.get("DISTCOMP_RAY_NODE"),
               "run_id": os.environ.get("MLFLOW_RUN_ID", ""), "info": [info.rank, info.world_size, info.node_rank]}, f)
print(f"rank {rank} of {os.environ['MY_WORLD']}", flush=True)
if str(rank) == sys.argv[2]:
    print(f"rank {rank} gives up on purpose", flush=True)
    sys.exit(5)
'''


@pytest.fixture
def mine(tmp_path: Path, ray_cluster: str) -> tuple[Path, dict[str, str]]:
    """The spec of a ``launcher: {type: mine}`` job, and an env that finds the installed plugin."""
    spec, site = plugin_job(tmp_path, RANK)
    return spec, ray_env(ray_cluster, tmp_path, PYTHONPATH=str(site))


@pytest.mark.slow
def test_a_plugin_launcher_runs_a_rank_on_each_ray_node_in_one_mlflow_run(tmp_path: Path,
                                                                         mine: tuple[Path, dict[str, str]]) -> None:
    spec, env = mine
    out = tmp_path / "out"
    proc = distcomp(env, "submit", str(spec), "--target", "ray", "--nodes", "2", "--output", f"result={out}",
                    cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    ranks = [json.loads((out / f"rank{r}.json").read_text()) for r in range(2)]
    assert [(r["rank"], r["world"], r["info"]) for r in ranks] == [(0, "2", [0, 2, 0]), (1, "2", [1, 2, 1])]
    assert sorted(r["node"] for r in ranks) == ["n1", "n2"]
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    (run,) = client.search_runs([e.experiment_id for e in client.search_experiments()])
    assert {r["run_id"] for r in ranks} == {run.info.run_id}
    assert run.info.status == "FINISHED" and run.data.tags["distcomp.launcher"] == "mine"
    compiled = distcomp(env, "compile", str(spec), "--target", "ray", "--nodes", "2", "--output", f"result={out}")
    assert "mine" not in json.dumps(json.loads(compiled.stdout)["node_record"]["replicas"])  # no branch on it


@pytest.mark.slow
def test_a_failing_plugin_rank_is_the_root_cause(tmp_path: Path, mine: tuple[Path, dict[str, str]]) -> None:
    spec, env = mine
    proc = distcomp(env, "submit", str(spec), "--target", "ray", "--nodes", "2", "--output",
                    f"result={tmp_path / 'out'}", "-i", "fail_rank=1", cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    cause = proc.stderr[proc.stderr.index("root cause:\n"):]
    assert cause.startswith("root cause:\n  rank1 (node 1, "), proc.stderr  # the node's index and address
    assert (") exited with code 5\n      rank 1 of 2\n      rank 1 gives up on purpose\n") in cause, proc.stderr
