"""tensorflow.distributed: one process per worker with its TF_CONFIG; a real
MultiWorkerMirroredStrategy all-reduce between them."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.mark.slow
@pytest.mark.parametrize("nodes, per_node", [(1, 2), (2, 1)], ids=["1x2", "2x1-simulated"])
def test_tensorflow_workers_all_reduce(distcomp_run, nodes: int, per_node: int) -> None:
    world = nodes * per_node
    flags = ("--nodes", str(nodes), "--nproc-per-node", str(per_node)) if nodes > 1 else ()
    run = distcomp_run("tensorflow", world, *flags, inputs={"nodes": nodes, "per_node": per_node})
    configs = [run.results[r]["tf_config"] for r in range(world)]
    assert [c["task"] for c in configs] == [{"type": "worker", "index": r} for r in range(world)]
    cluster = configs[0]["cluster"]
    assert all(c["cluster"] == cluster for c in configs)  # one cluster spec for the whole job
    assert list(cluster) == ["worker"] and len(cluster["worker"]) == world
    hosts = [w.rpartition(":")[0] for w in cluster["worker"]]
    ports = [w.rpartition(":")[2] for w in cluster["worker"]]
    assert hosts == [f"127.0.0.{r // per_node + 1}" for r in range(world)] and len(set(ports)) == world
    if not Path("/dev/nvidiactl").exists():
        assert {run.results[r]["env"]["CUDA_VISIBLE_DEVICES"] for r in range(world)} == {"-1"}
    assert [(i["rank"], i["role"], i["source"], i["node_rank"])
            for i in (run.results[r]["rank_info"] for r in range(world))] == [
        (r, "worker", "tensorflow", r // per_node) for r in range(world)]
    # worker i is rank i: its log is rankI.log and status.json names it so
    assert [(p["name"], p["role"]) for p in run.status["processes"]] == [(f"rank{r}", "worker") for r in range(world)]
