"""Shared by the rank scripts under jobs/: it runs INSIDE every rank, so each rank checks its
own launcher contract, and the test then checks what every rank wrote.

A broken contract raises ContractError (an AssertionError): the rank exits non-zero, the job
fails, and the test shows the rank's log. A rank that did nothing writes no result file, which
the test also catches. No dependency beyond the standard library and distcomp itself.
"""

from __future__ import annotations

import argparse
import dataclasses
import faulthandler
import json
import os
import sys
from pathlib import Path
from typing import Any

from distcomp.runtime import RankInfo, rank_info

LOCALHOST = "127.0.0.1"
# variables of the launcher contracts; a rank must not see one of another launcher's
CONTRACTS = {
    "torch": ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"),
    "openmpi": ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
    "tensorflow": ("TF_CONFIG",),
    "azure": ("AZUREML_MPI_HOSTFILE", "AZ_BATCH_MASTER_NODE"),
    "kubeflow": ("PET_NNODES", "PET_NODE_RANK"),
}


class ContractError(AssertionError):
    pass


def check(condition: bool, message: str) -> None:
    if not condition:
        raise ContractError(message)


def env(name: str) -> str:
    value = os.environ.get(name)
    check(value is not None and value != "", f"{name} is not set")
    return value  # type: ignore[return-value]


def expect(name: str, expected: object) -> str:
    """``os.environ[name] == str(expected)``."""
    value = os.environ.get(name)
    check(value == str(expected), f"{name}={value!r}, expected {str(expected)!r}")
    return value  # type: ignore[return-value]


def port_of(text: str, what: str) -> int:
    check(text.isdigit() and 1024 <= int(text) < 65536, f"{what}: {text!r} is not a usable port")
    return int(text)


def absent(*contracts: str) -> None:
    """None of these contracts' variables leaked into this rank."""
    for contract in contracts:
        for name in CONTRACTS[contract]:
            check(name not in os.environ, f"{name} is set ({os.environ.get(name)!r}) but this is not a {contract} job")


def expect_rank_info(expected: RankInfo) -> dict[str, Any]:
    """distcomp.runtime.rank_info() reads the same contract the launcher set."""
    got = rank_info()
    check(got == expected, f"rank_info() = {got}, expected {expected}")
    return dataclasses.asdict(got)


def expect_cpu_threads(nodes: int, per_node: int) -> None:
    """Several ranks on one machine get one OpenMP thread each, as under torchrun."""
    if nodes * per_node > 1:
        expect("OMP_NUM_THREADS", 1)


def arguments() -> argparse.Namespace:
    """--out (the output folder), --nodes and --per-node (what the test asked distcomp for),
    --watchdog (seconds): a rank stuck longer dumps its stack and exits 1 (a hang fails fast,
    with the place it hung in its log)."""
    p = argparse.ArgumentParser()
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--nodes", type=int, required=True)
    p.add_argument("--per-node", type=int, required=True)
    p.add_argument("--watchdog", type=float, default=60.0)
    args = p.parse_args()
    faulthandler.dump_traceback_later(args.watchdog, exit=True)
    check(args.out.is_dir(), f"output folder {args.out} was not created before the ranks started")
    return args


def expect_torch_rank(args: argparse.Namespace, mark: str) -> tuple[int, int, int, dict[str, Any]]:
    """The torch.distributed contract every torch-launched rank shares (torch, DeepSpeed):
    rank, world and node layout, the master, the spec's marker variable and rank_info().
    Returns (rank, world, master_port, rank_info)."""
    nodes, per_node = args.nodes, args.per_node
    world = nodes * per_node
    rank = int(env("RANK"))
    check(0 <= rank < world, f"RANK={rank} is outside 0..{world - 1}")
    local, node = rank % per_node, rank // per_node  # ranks are numbered node by node
    expect("WORLD_SIZE", world)
    expect("LOCAL_RANK", local)
    expect("LOCAL_WORLD_SIZE", per_node)
    expect("NODE_RANK", node)
    expect("GROUP_RANK", node)
    expect("MASTER_ADDR", LOCALHOST)
    master_port = port_of(env("MASTER_PORT"), "MASTER_PORT")
    expect("DISTCOMP_TEST_MARK", mark)  # the spec's environment_variables
    expect_cpu_threads(nodes, per_node)
    absent("openmpi", "tensorflow", "azure", "kubeflow")
    info = expect_rank_info(RankInfo(rank, world, local, per_node, node, LOCALHOST, master_port, "torch"))
    return rank, world, master_port, info


def expected_sum(world: int) -> int:
    """sum(rank + 1 for each rank): what the all-reduce of ``rank + 1`` gives."""
    return world * (world + 1) // 2


def finish(out: Path, rank: int, **record: Any) -> None:
    """Write OUT/rank{rank}.json (whole or not at all) and say so on stdout."""
    check(not (out / f"rank{rank}.json").exists(), f"rank{rank}.json already exists: two ranks think they are rank {rank}")
    record = {"rank": rank, "pid": os.getpid(), "cwd": os.getcwd(), "python": sys.executable, **record}
    tmp = out / f".rank{rank}.json.tmp"
    tmp.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    tmp.replace(out / f"rank{rank}.json")
    print(f"contract ok: rank {rank} all_reduce={record.get('all_reduce')}", flush=True)
