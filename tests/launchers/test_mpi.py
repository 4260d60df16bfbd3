"""mpi: one real ``mpirun`` over a hostfile; mpi4py ranks check Open MPI's and Azure ML's env,
and distcomp splits ``mpirun --output tag`` back into one log per rank."""

from __future__ import annotations

import re

import pytest


@pytest.mark.slow
@pytest.mark.parametrize("nodes, per_node", [(1, 2), (2, 2)], ids=["1x2", "2x2-simulated"])
def test_mpi_ranks_allreduce(distcomp_run, nodes: int, per_node: int) -> None:
    world = nodes * per_node
    flags = ("--nodes", str(nodes), "--nproc-per-node", str(per_node)) if nodes > 1 else ()
    run = distcomp_run("mpi", world, *flags, inputs={"nodes": nodes, "per_node": per_node})

    # the hostfile distcomp wrote and handed over as AZUREML_MPI_HOSTFILE
    hostfile = run.run_dir / "hostfile"
    hosts = ["localhost"] if nodes == 1 else [f"node{n}" for n in range(nodes)]
    assert hostfile.read_text().splitlines() == [f"{h} slots={per_node}" for h in hosts]
    envs = [run.results[r]["env"] for r in range(world)]
    assert {e["AZUREML_MPI_HOSTFILE"] for e in envs} == {str(hostfile)}
    assert len({e["AZ_BATCH_MASTER_NODE"] for e in envs}) == 1
    assert re.fullmatch(r"127\.0\.0\.1:\d+", envs[0]["AZ_BATCH_MASTER_NODE"])
    assert [(e["OMPI_COMM_WORLD_RANK"], e["OMPI_COMM_WORLD_LOCAL_RANK"], e["OMPI_COMM_WORLD_LOCAL_SIZE"])
            for e in envs] == [(str(r), str(r % per_node), str(per_node)) for r in range(world)]
    assert [run.results[r]["rank_info"]["node_rank"] for r in range(world)] == [r // per_node for r in range(world)]

    # one process (mpirun) in status.json; its ranks still get a log each
    assert [(p["name"], p["role"]) for p in run.status["processes"]] == [("launcher0", "launcher")]
    assert f"world size {world} (1 launcher)" in run.proc.stderr
    for r in range(world):
        log = run.log(f"rank{r}")
        # each rank's own lines, stdout and stderr, untagged; no other rank's lines
        assert f"stdout line @@rank={r}@@\n" in log and f"stderr line @@rank={r}@@\n" in log, log
        assert re.findall(r"@@rank=(\d+)@@", log) == [str(r)] * 2, log
        assert "<stdout>" not in log and "<stderr>" not in log
        assert f"stdout line @@rank={r}@@" in run.console(f"rank{r}")
        assert f"stderr line @@rank={r}@@" in run.console(f"rank{r}")
    assert "@@rank=" not in run.log("launcher0")  # mpirun's own output only
