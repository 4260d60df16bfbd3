"""A tracked job's first run on a new SQLite store, side by side (issue 38; mlstore/_template.py).

Each round, each side once, alternating which goes first, every run in a fresh folder with a
new store (``MLFLOW_TRACKING_URI=sqlite:///FOLDER/mlflow.db``):

  distcomp         `distcomp run` of a one-rank job (benchmarks/jobs/start: the rank is `date`),
                   tracked: the store made from the empty database kept for this MLflow version
                   (made up front, once, as the machine's first new store makes it), the run
                   created and ended
  first here       the same command where nothing is kept yet (a fresh XDG_CACHE_HOME): MLflow
                   makes the store, with its migrations, as every new store was made before
  plain MLflow     `mlflow.start_run()` and `end_run()` in a fresh process on the new store

Goal: distcomp <= 0.25 of plain MLflow's time.

    python benchmarks/new_store.py [--rounds N] [--check]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from _report import Row, finish, load, ratio_at_most, wall  # benchmarks/_report.py

ROOT = Path(__file__).resolve().parents[1]
JOB = ROOT / "benchmarks" / "jobs" / "start" / "component.yaml"
DISTCOMP = [sys.executable, "-m", "distcomp", "run", str(JOB), "--quiet", "--run-dir", "run"]
PLAIN = [sys.executable, "-c", "import mlflow; mlflow.start_run(); mlflow.end_run()"]


def _env(folder: Path, cache: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}
    return {**env, "MLFLOW_TRACKING_URI": f"sqlite:///{folder / 'mlflow.db'}", "XDG_CACHE_HOME": str(cache),
            "MLFLOW_DISABLE_TELEMETRY": "true"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--check", action="store_true", help="exit 1 if a goal is missed")
    args = parser.parse_args()
    load0, t0 = load(), time.perf_counter()
    times: dict[str, list[float]] = {"distcomp": [], "first": [], "plain": []}
    with tempfile.TemporaryDirectory(prefix="distcomp-bench-store-") as tmp:
        kept = Path(tmp) / "kept-cache"
        first = Path(tmp) / "warmup"
        first.mkdir()
        wall(DISTCOMP, _env(first, kept), cwd=first)  # this machine's first new store: the kept copy
        for i in range(args.rounds):
            sides = [("distcomp", DISTCOMP, kept), ("first", DISTCOMP, None), ("plain", PLAIN, None)]
            for name, argv, cache in sides if i % 2 == 0 else sides[::-1]:
                folder = Path(tmp) / f"{name}{i}"
                folder.mkdir()
                times[name].append(wall(argv, _env(folder, cache or folder / "cache"), cwd=folder))
    rows = [Row("tracked job, first run on a new SQLite store", "mlflow.start_run() on a new store",
                times["distcomp"], times["plain"], ratio_at_most(0.25), key="new-store"),
            Row("tracked job, first run on a new SQLite store (nothing kept yet)", "mlflow.start_run() on a new store",
                times["first"], times["plain"], None, key="new-store-first")]
    return finish(rows, load0, time.perf_counter() - t0, args.check)


if __name__ == "__main__":
    try:
        sys.exit(main())
    except RuntimeError as exc:  # a command failed: say which, without a traceback
        raise SystemExit(str(exc)) from None
