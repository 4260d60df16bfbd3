"""torch.distributed: real ranks with torchrun's env contract and a gloo all-reduce."""

from __future__ import annotations

import pytest


@pytest.mark.slow
@pytest.mark.parametrize("nodes, per_node", [(1, 2), (2, 2)], ids=["1x2", "2x2-simulated"])
def test_torch_ranks_all_reduce(distcomp_run, nodes: int, per_node: int) -> None:
    world = nodes * per_node
    flags = ("--nodes", str(nodes), "--nproc-per-node", str(per_node)) if nodes > 1 else ()
    run = distcomp_run("torch", world, *flags, inputs={"nodes": nodes, "per_node": per_node})
    envs = [run.results[r]["env"] for r in range(world)]
    assert [(e["RANK"], e["LOCAL_RANK"], e["NODE_RANK"], e["GROUP_RANK"]) for e in envs] == [
        (str(r), str(r % per_node), str(r // per_node), str(r // per_node)) for r in range(world)]
    assert {e["MASTER_ADDR"] for e in envs} == {"127.0.0.1"}
    assert len({e["MASTER_PORT"] for e in envs}) == 1
    assert {e["TORCHELASTIC_RUN_ID"] for e in envs} == {run.run_dir.name}  # the job id
    assert [run.results[r]["rank_info"]["node_rank"] for r in range(world)] == [r // per_node for r in range(world)]
    # status.json: one process per rank, on its node
    assert [(p["name"], p["role"], p["node"]) for p in run.status["processes"]] == [
        (f"rank{r}", "worker", r // per_node) for r in range(world)]
    assert "process(es), world size %d" % world in run.proc.stderr
