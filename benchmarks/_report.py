"""The results every benchmark reports: a printed table (medians, the ratio to the raw tool, the
goal) and the same rows as JSON in ``benchmarks/results/SCRIPT.json``, which the docs' plot is
drawn from (docs/hooks/benchmarks.py)."""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

# (distcomp median, raw median) -> (goal met, the goal as text)
Judge = Callable[[float, float], tuple[bool, str]]

RESULTS = Path(__file__).resolve().parent / "results"  # committed: `make bench` refreshes it
RESULTS_ENV = "DISTCOMP_BENCH_RESULTS"  # another folder for the JSON files (a trial run)
# the packages whose versions decide the numbers, in the JSON header where installed
PACKAGES = ("distcomp", "torch", "tensorflow-cpu", "tensorflow", "mpi4py", "mlflow", "ray", "azure-ai-ml", "torchx",
            "PyYAML")


@dataclass(frozen=True)
class Goal:
    """A goal a row is judged by: ``kind`` is ``ratio`` (distcomp / raw <= value), ``seconds``
    (distcomp <= value s) or ``added`` (distcomp - raw <= value s)."""

    kind: str
    value: float

    def __call__(self, ours: float, raw: float) -> tuple[bool, str]:
        if self.kind == "ratio":
            return ours / raw <= self.value, f"ratio <= {self.value:g}"
        if self.kind == "seconds":
            return ours <= self.value, f"<= {self.value:g} s"
        return ours - raw <= self.value, f"+{self.value:g} s ({ours - raw:+.2f})"

    def as_ratio(self, raw: float) -> float:
        """The ratio to the raw tool at which this goal is just met (for the plot's mark)."""
        if self.kind == "ratio":
            return self.value
        return (self.value if self.kind == "seconds" else raw + self.value) / raw


def ratio_at_most(goal: float) -> Judge:
    return Goal("ratio", goal)


def seconds_at_most(goal: float) -> Judge:
    return Goal("seconds", goal)


def added_at_most(goal: float) -> Judge:
    return Goal("added", goal)


@dataclass(frozen=True)
class Row:
    name: str
    raw_label: str
    ours_s: Sequence[float]
    raw_s: Sequence[float]
    judge: Judge | None  # None: a row without a goal, measured for the record
    error: str = ""
    notes: Mapping[str, Sequence[float]] = field(default_factory=dict)  # printed beside, not judged
    key: str = ""  # the row's id in the JSON (default: made from its name)

    @property
    def id(self) -> str:
        if self.key:
            return self.key
        words = "".join(c if c.isalnum() else " " for c in self.name.lower()).split()
        return "-".join(words)


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
        ok, goal = r.judge(ours, raw) if r.judge else (True, "")
        missed += not ok
        print(f"{r.name:<{width}} {r.raw_label:<18} {ours:>10.3f} {raw:>8.3f} {ours / raw:>7.3f}  {goal:<16} "
              f"{('PASS' if ok else 'MISS') if r.judge else ''}".rstrip())
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


def finish(rows: Sequence[Row], load_before: str, seconds: float, check: bool, json_path: Path | None = None) -> int:
    """Print the totals and the table, and write the rows as JSON (``record``); the exit code:
    2 if a benchmark broke, 1 if ``check`` and a goal was missed, else 0."""
    load_after = load()
    print(f"total {seconds:.0f} s; load average before {load_before}, after {load_after}"
          " (other work on the machine skews the numbers)\n")
    missed, broken = report(rows)
    record(rows, load_before, seconds, json_path, load_after=load_after)
    if broken:
        return 2
    return 1 if check and missed else 0


def results_path(script: str | None = None) -> Path:
    """Where a script's JSON goes: ``benchmarks/results/SCRIPT.json``, or the folder
    $DISTCOMP_BENCH_RESULTS names."""
    name = script or Path(sys.argv[0]).stem
    return Path(os.environ.get(RESULTS_ENV) or RESULTS) / f"{name}.json"


def record(rows: Sequence[Row], load_before: str, seconds: float, json_path: Path | None = None,
           load_after: str | None = None) -> Path:
    """Write the rows as JSON, whole or not at all (a temporary file renamed); prints where."""
    path = json_path or results_path()
    doc = results(rows, load_before, load_after or load(), seconds, path.stem)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        os.fchmod(fd, 0o644)  # mkstemp's 0600 would stay on the renamed file
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(doc, out, indent=1)
            out.write("\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    print(f"\nresults written to {_shown(path)}")
    return path


def _shown(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def results(rows: Sequence[Row], load_before: str, load_after: str, seconds: float, benchmark: str) -> dict[str, Any]:
    """The JSON document of one script's run: a header (when, where, with what) and its rows."""
    return {
        "benchmark": benchmark,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
        "seconds": round(seconds, 1),
        "machine": {"cores": os.cpu_count(), "load_before": [float(x) for x in load_before.split()],
                    "load_after": [float(x) for x in load_after.split()],
                    "system": f"{platform.system()} {platform.release()} {platform.machine()}"},
        "python": platform.python_version(),
        "packages": _versions(),
        "rows": [_row(r) for r in rows],
    }


def _versions() -> dict[str, str]:
    found = {}
    for name in PACKAGES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return found


def _row(r: Row) -> dict[str, Any]:
    out: dict[str, Any] = {"id": r.id, "label": r.name, "raw": r.raw_label, "distcomp_s": None, "raw_s": None,
                           "ratio": None, "goal": None, "rounds": len(r.ours_s), "raw_rounds": len(r.raw_s)}
    if r.ours_s and r.raw_s and not r.error:
        ours, raw = statistics.median(r.ours_s), statistics.median(r.raw_s)
        out.update(distcomp_s=ours, raw_s=raw, ratio=ours / raw)
        if r.judge:
            met, text = r.judge(ours, raw)
            out["goal"] = {"text": text, "met": met}
            if isinstance(r.judge, Goal):
                out["goal"].update(kind=r.judge.kind, value=r.judge.value, ratio=r.judge.as_ratio(raw))
    out["runs"] = {"distcomp": list(r.ours_s), "raw": list(r.raw_s)}
    out["notes"] = {label: {"median": statistics.median(v), "runs": list(v)} for label, v in r.notes.items() if v}
    out["error"] = r.error or None
    return out


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
