"""Every node's system metrics in the job's one MLflow run, on the real two-node Ray cluster
(issue 37): each node's agent samples its node while its ranks run. A node is named by its
address; the dev cluster's two nodes share this machine's, so each gets its index too."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mlflow import MlflowClient

from .conftest import TORCH, distcomp, ray_env


def test_the_record_asks_each_agent_to_sample(tmp_path: Path) -> None:
    """Pure: on by default (every 10 s), the flag's interval, none with it off."""
    def entry(*flags: str) -> object:
        proc = distcomp(ray_env(None, tmp_path), "compile", str(TORCH), "--target", "ray", "--nodes", "2",
                        "--output", f"result={tmp_path / 'out'}", *flags, cwd=tmp_path, timeout=120)
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout)["node_record"].get("system_metrics")

    assert entry() == {"interval": 10.0}
    assert entry("--system-metrics-interval", "3") == {"interval": 3.0}
    assert entry("--no-system-metrics") is None


@pytest.mark.slow
def test_two_nodes_give_one_run_with_both_nodes_series(ray_cluster: str, tmp_path: Path) -> None:
    env = ray_env(ray_cluster, tmp_path)
    out = tmp_path / "out"
    proc = distcomp(env, "submit", str(TORCH), "--target", "ray", "--nodes", "2", "--output", f"result={out}",
                    "--input", "sleep=12", "--system-metrics-interval", "1", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    (run,) = client.search_runs([e.experiment_id for e in client.search_experiments()])
    nodes = sorted({k.split("/")[1] for k in run.data.metrics if k.startswith("system/")})
    # both nodes are this machine (one address): the address, then the node's index
    assert len(nodes) == 2 and [n.rpartition("-")[2] for n in nodes] == ["node0", "node1"], (nodes, proc.stderr)
    assert nodes[0].rpartition("-")[0] == nodes[1].rpartition("-")[0] != "", nodes
    for node in nodes:
        history = client.get_metric_history(run.info.run_id, f"system/{node}/cpu_utilization_percentage")
        assert len(history) >= 2, (node, len(history))
        assert f"system/{node}/system_memory_usage_megabytes" in run.data.metrics
    assert run.info.status == "FINISHED"
    assert "system metrics" not in proc.stderr + proc.stdout  # nothing went wrong: nothing said
