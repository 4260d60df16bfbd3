"""deepspeed: the torch.distributed contract, which deepspeed.init_distributed() reads
without falling back to MPI discovery; a gloo all-reduce through torch and deepspeed.comm.

DeepSpeed's CPU accelerator JIT-builds its shared-memory comm op the first time it runs on a
machine (about 45 s here, cached in ~/.cache/torch_extensions), hence the longer timeout."""

from __future__ import annotations

import pytest


@pytest.mark.slow
def test_deepspeed_ranks_all_reduce(distcomp_run) -> None:
    world = 2
    run = distcomp_run("deepspeed", world, timeout=420, inputs={"watchdog": 360})
    for r in range(world):
        result = run.results[r]
        assert result["ds_all_reduce"] == 3 and result["backend"] == "gloo" and result["accelerator"] == "cpu"
        info = result["rank_info"]
        assert (info["rank"], info["world_size"], info["local_rank"], info["source"]) == (r, world, r, "torch")
    assert [(p["name"], p["role"]) for p in run.status["processes"]] == [(f"rank{r}", "worker") for r in range(world)]
    assert "deepspeed, 1 node(s) x 2 process(es), world size 2" in run.proc.stderr
    # no MPI discovery: the env contract was complete
    assert "attempting to detect MPI environment" not in run.log("rank0")
