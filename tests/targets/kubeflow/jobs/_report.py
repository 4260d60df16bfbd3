"""Shared by the rank scripts under jobs/; it runs inside every rank of an emulated pod.

A rank checks what it can see alone (the world size the test asked for, the all-reduce
sum) and exits 1 when it is wrong, so a broken job fails; it then writes OUT/rankN.json
with what it saw (env, rank_info(), peers) for the test to compare across ranks.
Standard library and distcomp only.
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


def arguments() -> argparse.Namespace:
    """--world (the world size the test asked for), --tag (a word to pass through as
    written), --out (the output folder), --watchdog (seconds: a rank stuck longer dumps its
    stack and exits 1)."""
    p = argparse.ArgumentParser()
    p.add_argument("--world", type=int, required=True)
    p.add_argument("--tag", required=True)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--watchdog", type=float, default=60.0)
    args = p.parse_args()
    faulthandler.dump_traceback_later(args.watchdog, exit=True)
    args.out.mkdir(parents=True, exist_ok=True)
    return args


def check(condition: bool, message: str) -> None:
    if not condition:
        print(f"rank check failed: {message}", file=sys.stderr, flush=True)
        sys.exit(1)


def expected_sum(world: int) -> int:
    """sum(rank + 1 for each rank): what the all-reduce of ``rank + 1`` gives."""
    return world * (world + 1) // 2


def environ(*names: str) -> dict[str, str | None]:
    return {name: os.environ.get(name) for name in names}


def rank_info() -> dict[str, Any]:
    from distcomp.runtime import rank_info as info

    return dataclasses.asdict(info())


def finish(out: Path, rank: int, **record: Any) -> None:
    """Write OUT/rank{rank}.json whole, once."""
    check(not (out / f"rank{rank}.json").exists(), f"rank{rank}.json exists: two ranks think they are rank {rank}")
    record = {"rank": rank, "pid": os.getpid(), "cwd": os.getcwd(), "argv": sys.argv[1:], **record}
    tmp = out / f".rank{rank}.json.tmp"
    tmp.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    tmp.replace(out / f"rank{rank}.json")
    print(f"rank {rank}: all-reduce {record.get('all_reduce')} ok", flush=True)
