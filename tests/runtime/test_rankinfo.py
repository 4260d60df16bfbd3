"""rank_info() answers from every launcher contract: env-dict cases, then real ranks."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from distcomp.runtime import RankInfo, RankInfoError, rank_info

BIN = Path(sys.executable).parent
# each rank prints its RankInfo as JSON in one write(): with PYTHONUNBUFFERED, print() writes the
# text and "\n" apart, and ranks sharing a stdout could interleave between the two
PROBE = ("import dataclasses, json, sys\nfrom distcomp.runtime import rank_info\n"
         "sys.stdout.write(json.dumps(dataclasses.asdict(rank_info())) + '\\n')\nsys.stdout.flush()\n")


def test_single_process_without_any_contract() -> None:
    assert rank_info({}) == RankInfo(0, 1, 0, 1, 0, None, None, "single")
    assert rank_info({}).is_main


def test_torchrun_contract() -> None:
    env = {"RANK": "5", "WORLD_SIZE": "8", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "4", "GROUP_RANK": "1",
           "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500"}
    assert rank_info(env) == RankInfo(5, 8, 1, 4, 1, "10.0.0.1", 29500, "torch")


def test_plain_pytorchjob_pod_has_no_local_rank() -> None:
    info = rank_info({"RANK": "2", "WORLD_SIZE": "4", "MASTER_ADDR": "job-master-0", "MASTER_PORT": "23456"})
    assert (info.rank, info.local_rank, info.local_world_size, info.node_rank) == (2, 0, 1, 2)


def test_open_mpi_with_azure_master() -> None:
    env = {"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_LOCAL_RANK": "1",
           "OMPI_COMM_WORLD_LOCAL_SIZE": "2", "AZ_BATCH_MASTER_NODE": "10.0.0.4:6105"}
    assert rank_info(env) == RankInfo(3, 4, 1, 2, 1, "10.0.0.4", 6105, "openmpi")


def test_mpich_pmi() -> None:
    env = {"PMI_RANK": "1", "PMI_SIZE": "2", "MPI_LOCALRANKID": "1", "MPI_LOCALNRANKS": "2"}
    assert rank_info(env) == RankInfo(1, 2, 1, 2, 0, None, None, "pmi")


def test_tf_config_chief_workers_and_ps() -> None:
    cluster = {"chief": ["h0:2000"], "worker": ["h0:2001", "h1:2002", "h1:2003"], "ps": ["h2:2004"]}
    tf = lambda role, i: {"TF_CONFIG": json.dumps({"cluster": cluster, "task": {"type": role, "index": i}})}  # noqa: E731
    assert rank_info(tf("chief", 0)) == RankInfo(0, 4, 0, 2, 0, "h0", 2000, "tensorflow", "chief")
    assert rank_info(tf("worker", 2)) == RankInfo(3, 4, 1, 2, 1, "h0", 2000, "tensorflow", "worker")
    ps = rank_info(tf("ps", 0))
    assert (ps.role, ps.rank, ps.world_size, ps.is_main) == ("ps", 0, 1, False)


def test_kubeflow_pet_before_torchrun() -> None:
    env = {"PET_NNODES": "3", "PET_NPROC_PER_NODE": "1", "PET_NODE_RANK": "2", "PET_MASTER_ADDR": "m", "PET_MASTER_PORT": "23456"}
    assert rank_info(env) == RankInfo(2, 3, 0, 1, 2, "m", 23456, "kubeflow")


def test_distcomps_own_contract_after_the_launchers_and_before_the_slurm_task() -> None:
    own = {"DISTCOMP_RANK": "3", "DISTCOMP_WORLD_SIZE": "4", "DISTCOMP_LOCAL_RANK": "1",
           "DISTCOMP_LOCAL_WORLD_SIZE": "2", "DISTCOMP_NODE_RANK": "1", "MASTER_ADDR": "m"}
    slurm_task = {"SLURM_PROCID": "1", "SLURM_NTASKS": "2", "SLURM_STEP_ID": "0"}  # the node agent's task
    assert rank_info({**own, **slurm_task}) == RankInfo(3, 4, 1, 2, 1, "m", None, "distcomp")
    assert rank_info({**own, "RANK": "0", "WORLD_SIZE": "1"}).source == "torch"  # a launcher's own wins
    assert not rank_info({**own, "DISTCOMP_RANK": "1"}).is_main


@pytest.mark.parametrize("env, message", [
    ({"RANK": "one"}, "RANK='one' is not an integer"),
    ({"OMPI_COMM_WORLD_RANK": "0"}, "OMPI_COMM_WORLD_SIZE is not set"),
    ({"TF_CONFIG": "{not json"}, "TF_CONFIG is malformed (JSONDecodeError"),
    ({"TF_CONFIG": '{"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": 3}}'}, "TF_CONFIG is malformed (IndexError"),
])
def test_malformed_contract_says_which_variable(env: dict, message: str) -> None:
    with pytest.raises(RankInfoError) as info:
        rank_info(env)
    assert str(info.value).startswith(message)


def _clean_env() -> dict[str, str]:
    drop = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "OMPI_", "PMI_", "TF_CONFIG", "PET_", "MASTER_")
    return {k: v for k, v in os.environ.items() if not k.startswith(drop)}


@pytest.mark.slow
def test_real_torchrun_ranks(tmp_path: Path) -> None:
    (tmp_path / "probe.py").write_text(PROBE)
    proc = subprocess.run([str(BIN / "torchrun"), "--standalone", "--nproc-per-node", "2", str(tmp_path / "probe.py")],
                          capture_output=True, text=True, timeout=120, env=_clean_env())
    assert proc.returncode == 0, proc.stderr[-2000:]
    infos = sorted((json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")), key=lambda i: i["rank"])
    assert [(i["rank"], i["world_size"], i["local_rank"], i["local_world_size"], i["node_rank"], i["source"])
            for i in infos] == [(0, 2, 0, 2, 0, "torch"), (1, 2, 1, 2, 0, "torch")]
    assert all(i["master_addr"] and i["master_port"] for i in infos)


@pytest.mark.slow
def test_real_open_mpi_ranks() -> None:
    proc = subprocess.run([str(BIN / "mpirun"), "--allow-run-as-root", "--oversubscribe", "-np", "2",
                           sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120, env=_clean_env())
    assert proc.returncode == 0, proc.stderr[-2000:]
    infos = sorted((json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")), key=lambda i: i["rank"])
    assert [(i["rank"], i["world_size"], i["local_rank"], i["local_world_size"], i["source"]) for i in infos] == [
        (0, 2, 0, 2, "openmpi"), (1, 2, 1, 2, "openmpi")]
