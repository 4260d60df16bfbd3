"""RankInfo: who am I in the job, from whichever launcher contract the environment carries.

Checked in this order, the first contract present wins:
torchrun / torch.distributed (RANK, WORLD_SIZE, ...), Open MPI (OMPI_COMM_WORLD_*),
MPICH / Intel MPI (PMI_RANK, PMI_SIZE, MPI_LOCALRANKID), TensorFlow (TF_CONFIG),
Kubeflow's torchrun arguments (PET_*), distcomp's own (DISTCOMP_RANK, DISTCOMP_WORLD_SIZE,
DISTCOMP_LOCAL_RANK, DISTCOMP_LOCAL_WORLD_SIZE, DISTCOMP_NODE_RANK: what distcomp gives the ranks
of a launcher that sets none of these), a Slurm srun task (SLURM_PROCID, SLURM_NTASKS,
SLURM_LOCALID, SLURM_NODEID; in a step, not the batch script's own shell). Azure's
AZ_BATCH_MASTER_NODE fills in the master address where the rank contract lacks it. No contract at all: a single process.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Mapping

from ..errors import UsageError


class RankInfoError(UsageError, ValueError):
    """A launcher variable is present but malformed."""


@dataclass(frozen=True)
class RankInfo:
    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    node_rank: int
    master_addr: str | None
    master_port: int | None
    source: str  # which contract answered: torch, openmpi, pmi, tensorflow, kubeflow, distcomp, slurm, single
    role: str = "worker"  # TensorFlow: chief, worker, ps, evaluator

    @property
    def is_main(self) -> bool:
        """Rank 0 of the training ranks: the one that logs and writes outputs."""
        return self.rank == 0 and self.role in ("worker", "chief")


def _int(env: Mapping[str, str], name: str, default: int | None = None) -> int:
    raw = env.get(name)
    if raw is None or raw == "":
        if default is None:
            raise RankInfoError(f"{name} is not set")
        return default
    try:
        return int(raw)
    except ValueError:
        raise RankInfoError(f"{name}={raw!r} is not an integer") from None


def _master(env: Mapping[str, str]) -> tuple[str | None, int | None]:
    """MASTER_ADDR/MASTER_PORT, else Azure's AZ_BATCH_MASTER_NODE=host:port."""
    addr = env.get("MASTER_ADDR") or None
    port = _int(env, "MASTER_PORT") if env.get("MASTER_PORT") else None
    node = env.get("AZ_BATCH_MASTER_NODE") or env.get("AZ_BATCHAI_MPI_MASTER_NODE")
    if node and addr is None:
        host, _, p = node.partition(":")
        addr = host or None
        if port is None and p:
            port = _int({"AZ_BATCH_MASTER_NODE": p}, "AZ_BATCH_MASTER_NODE")
    return addr, port


def _torch(env: Mapping[str, str]) -> RankInfo:
    rank, world = _int(env, "RANK"), _int(env, "WORLD_SIZE", 1)
    local = _int(env, "LOCAL_RANK", 0)
    local_world = _int(env, "LOCAL_WORLD_SIZE", 1 if "LOCAL_RANK" not in env else world)
    node = _int(env, "GROUP_RANK", _int(env, "NODE_RANK", rank // max(local_world, 1)))
    return RankInfo(rank, world, local, local_world, node, *_master(env), source="torch")


def _openmpi(env: Mapping[str, str]) -> RankInfo:
    rank, world = _int(env, "OMPI_COMM_WORLD_RANK"), _int(env, "OMPI_COMM_WORLD_SIZE")
    local, local_world = _int(env, "OMPI_COMM_WORLD_LOCAL_RANK", 0), _int(env, "OMPI_COMM_WORLD_LOCAL_SIZE", 1)
    node = _int(env, "AZ_BATCHAI_TASK_INDEX", rank // max(local_world, 1))  # by-slot mapping
    return RankInfo(rank, world, local, local_world, node, *_master(env), source="openmpi")


def _pmi(env: Mapping[str, str]) -> RankInfo:
    rank, world = _int(env, "PMI_RANK"), _int(env, "PMI_SIZE")
    local, local_world = _int(env, "MPI_LOCALRANKID", 0), _int(env, "MPI_LOCALNRANKS", 1)
    return RankInfo(rank, world, local, local_world, rank // max(local_world, 1), *_master(env), source="pmi")


def _tensorflow(env: Mapping[str, str]) -> RankInfo:
    try:
        config = json.loads(env["TF_CONFIG"])
        cluster, task = config["cluster"], config["task"]
        role, index = str(task["type"]), int(task["index"])
        hosts = {r: [str(h) for h in cluster.get(r, [])] for r in ("chief", "worker", "ps", "evaluator")}
        me = hosts[role][index] if role != "evaluator" else str(cluster.get("evaluator", ["localhost:0"])[index])
    except (KeyError, IndexError, TypeError, ValueError, AttributeError) as exc:
        raise RankInfoError(f"TF_CONFIG is malformed ({type(exc).__name__}: {exc})") from None
    training = hosts["chief"] + hosts["worker"]  # the chief is rank 0 when there is one
    if role in ("chief", "worker"):
        rank, world, peers = (index if role == "chief" else len(hosts["chief"]) + index), len(training), training
    else:
        rank, world, peers = index, len(hosts[role]), hosts[role]
    host = me.rpartition(":")[0]
    same_host = [p for p in peers if p.rpartition(":")[0] == host]
    node_hosts = list(dict.fromkeys(p.rpartition(":")[0] for p in peers))
    lead = training[0] if training else me
    addr, _, port = lead.rpartition(":")
    return RankInfo(rank, world, same_host.index(me) if me in same_host else 0, max(len(same_host), 1),
                    node_hosts.index(host) if host in node_hosts else 0, addr or None,
                    int(port) if port.isdigit() else None, source="tensorflow", role=role)


def _kubeflow(env: Mapping[str, str]) -> RankInfo:
    """Inside a PyTorchJob pod before torchrun has spread the ranks (one process per pod)."""
    nodes, per_node = _int(env, "PET_NNODES", 1), _int(env, "PET_NPROC_PER_NODE", 1)
    node = _int(env, "PET_NODE_RANK", 0)
    addr = env.get("PET_MASTER_ADDR") or None
    port = _int(env, "PET_MASTER_PORT") if env.get("PET_MASTER_PORT") else None
    return RankInfo(node * per_node, nodes * per_node, 0, per_node, node, addr, port, source="kubeflow")


def _distcomp(env: Mapping[str, str]) -> RankInfo:
    """A rank of a launcher with no contract of its own (``distcomp.core.plan.RANK_ENV``)."""
    return RankInfo(_int(env, "DISTCOMP_RANK"), _int(env, "DISTCOMP_WORLD_SIZE", 1),
                    _int(env, "DISTCOMP_LOCAL_RANK", 0), _int(env, "DISTCOMP_LOCAL_WORLD_SIZE", 1),
                    _int(env, "DISTCOMP_NODE_RANK", 0), *_master(env), source="distcomp")


def _slurm(env: Mapping[str, str]) -> RankInfo:
    """A task of an ``srun`` step (one process per rank, no launcher env of its own)."""
    rank, world = _int(env, "SLURM_PROCID"), _int(env, "SLURM_NTASKS", 1)
    # SLURM_TASKS_PER_NODE: "2(x2)" or "2,1": this node's count is the first when they are even
    per_node = env.get("SLURM_NTASKS_PER_NODE") or env.get("SLURM_TASKS_PER_NODE", "1")
    digits = per_node.split("(")[0].split(",")[0]
    local_world = int(digits) if digits.isdigit() else 1
    return RankInfo(rank, world, _int(env, "SLURM_LOCALID", 0), local_world, _int(env, "SLURM_NODEID", 0),
                    *_master(env), source="slurm")


def rank_info(env: Mapping[str, str] | None = None) -> RankInfo:
    """This process's place in the job; ``env`` defaults to ``os.environ``."""
    env = os.environ if env is None else env
    if "RANK" in env:
        return _torch(env)
    if "OMPI_COMM_WORLD_RANK" in env:
        return _openmpi(env)
    if "PMI_RANK" in env:
        return _pmi(env)
    if env.get("TF_CONFIG"):
        return _tensorflow(env)
    if "PET_NODE_RANK" in env or "PET_NNODES" in env:
        return _kubeflow(env)
    if "DISTCOMP_RANK" in env:
        return _distcomp(env)
    if "SLURM_PROCID" in env and "SLURM_STEP_ID" in env:  # a batch script's own shell is no rank
        return _slurm(env)
    addr, port = _master(env)
    return RankInfo(0, 1, 0, 1, 0, addr, port, source="single")
