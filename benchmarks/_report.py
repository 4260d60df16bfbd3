"""The results table every benchmark prints: medians, the ratio to the raw tool, the goal."""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

# (distcomp median, raw median) -> (goal met, the goal as text)
Judge = Callable[[float, float], tuple[bool, str]]


def ratio_at_most(goal: float) -> Judge:
    return lambda ours, raw: (ours / raw <= goal, f"ratio <= {goal:g}")


def seconds_at_most(goal: float) -> Judge:
    return lambda ours, raw: (ours <= goal, f"<= {goal:g} s")


def added_at_most(goal: float) -> Judge:
    return lambda ours, raw: (ours - raw <= goal, f"+{goal:g} s ({ours - raw:+.2f})")


@dataclass(frozen=True)
class Row:
    name: str
    raw_label: str
    ours_s: Sequence[float]
    raw_s: Sequence[float]
    judge: Judge
    error: str = ""
    notes: Mapping[str, Sequence[float]] = field(default_factory=dict)  # printed beside, not judged


def wall(argv: list[str], env: Mapping[str, str] | None = None, cwd: str | os.PathLike[str] | None = None) -> float:
    """Seconds one fresh process takes; RuntimeError with its stderr tail when it fails."""
    start = time.perf_counter()
    proc = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=cwd)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[:4])} failed ({proc.returncode}): {proc.stderr.decode()[-800:]}")
    return elapsed


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def _each(values: Sequence[float]) -> str:
    return " ".join(f"{x:.3f}" for x in values)


def report(rows: Sequence[Row]) -> tuple[int, int]:
    """Print the table, every run and the errors; returns (goals missed, benchmarks broken)."""
    width = max([len("benchmark"), *(len(r.name) for r in rows)]) + 1
    head = f"{'benchmark':<{width}} {'vs':<18} {'distcomp s':>10} {'raw s':>8} {'ratio':>7}  {'goal':<16} result"
    print(head)
    print("-" * len(head))
    missed = broken = 0
    for r in rows:
        if r.error or not r.ours_s or not r.raw_s:
            broken += 1
            print(f"{r.name:<{width}} {r.raw_label:<18} {'':>10} {'':>8} {'':>7}  {'':<16} ERROR")
            continue
        ours, raw = statistics.median(r.ours_s), statistics.median(r.raw_s)
        ok, goal = r.judge(ours, raw)
        missed += not ok
        print(f"{r.name:<{width}} {r.raw_label:<18} {ours:>10.3f} {raw:>8.3f} {ours / raw:>7.3f}  {goal:<16} "
              f"{'PASS' if ok else 'MISS'}")
    print("\nevery run (s), in round order:")
    for r in rows:
        if r.ours_s or r.raw_s:
            print(f"  {r.name}: distcomp {_each(r.ours_s)} | {r.raw_label} {_each(r.raw_s)}")
            for label, values in r.notes.items():
                if values:
                    print(f"    {label}: median {statistics.median(values):.3f} s ({_each(values)})")
    for r in rows:
        if r.error:
            print(f"\nERROR {r.name}: {r.error}")
    return missed, broken


def finish(rows: Sequence[Row], load_before: str, seconds: float, check: bool) -> int:
    """Print the totals and the table; the exit code: 2 if a benchmark broke, 1 if ``check``
    and a goal was missed, else 0."""
    print(f"total {seconds:.0f} s; load average before {load_before}, after {load()}"
          " (other work on the machine skews the numbers)\n")
    missed, broken = report(rows)
    if broken:
        return 2
    return 1 if check and missed else 0


@dataclass(frozen=True)
class Session:
    """A benchmark script's run: its ``--repeat``/``--check`` and when it started, under what load."""

    repeat: int
    check: bool
    load_before: str = field(default_factory=load)
    started: float = field(default_factory=time.perf_counter)

    def finish(self, rows: Sequence[Row]) -> int:
        return finish(rows, self.load_before, time.perf_counter() - self.started, self.check)


def begin(repeat: int = 5) -> Session:
    """The common command line (``--repeat N``, ``--check``) parsed, the clock started."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=repeat)
    ap.add_argument("--check", action="store_true", help="exit 1 when a goal is missed")
    args = ap.parse_args()
    return Session(args.repeat, args.check)
