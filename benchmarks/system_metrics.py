"""What sampling a node's system metrics costs (issue 37): the CPU of the one monitor process
distcomp starts per node (``python -m distcomp.tracking.monitor``, which every target's node runs:
the local job per simulated node, the node agent on Slurm, Ray and Kubeflow), against MLflow's own
monitor in a bare process (``mlflow.start_run(log_system_metrics=True)`` and nothing else), both
sampling at the same interval into one SQLite store (what a local user gets), side by side.

CPU is user + system time from /proc/PID/stat over a measured window of several intervals, after
one interval of warm-up (the first sample and its first write are start-up, reported apart), in
CPU seconds per 100 s of wall time, that is, percent of one core. Rows: the default 10 s interval
(goal: < 1 % of a core) and a short one (1 s: the price of a fine-grained view, no goal). Beside
them: each process's start-up CPU (importing mlflow, to its first sample). Median of --repeat
rounds (default 3): about 3 minutes.

    python benchmarks/system_metrics.py [--repeat N] [--check]
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _report import Row, begin, seconds_at_most  # benchmarks/_report.py

TICK = os.sysconf("SC_CLK_TCK")
SLOW, FAST = 10.0, 1.0  # the default interval, and a short one
WINDOW = 3  # intervals measured (of the slow one; the fast one is measured over the same window)
BARE = ("import sys, time, mlflow; mlflow.set_tracking_uri(sys.argv[1]); "
        "mlflow.start_run(run_id=sys.argv[2], log_system_metrics=True); print('ready', flush=True); time.sleep(1e6)")


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime, stime (fields 14, 15 of proc(5))


def start(argv: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)


def ready(name: str, proc: subprocess.Popen[str]) -> None:
    """Wait for the process's ``ready`` line (its first sample is under way)."""
    assert proc.stdout is not None
    if proc.stdout.readline().strip() != "ready":
        proc.kill()
        raise RuntimeError(f"{name} did not start (exit {proc.wait()})")


def one_round(uri: str, runs: dict[str, str]) -> dict[str, tuple[float, float]]:
    """Each process's (start-up CPU s, % of a core over the window): ours and MLflow's, at each interval."""
    procs: dict[str, subprocess.Popen[str]] = {}
    base = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}
    try:
        for interval in (SLOW, FAST):
            ours = {**base, "MLFLOW_RUN_ID": runs[f"ours-{interval:g}"], "MLFLOW_TRACKING_URI": uri}
            procs[f"ours-{interval:g}"] = start([sys.executable, "-m", "distcomp.tracking.monitor", "--node-id",
                                                 f"bench-{interval:g}", "--interval", str(interval)], ours)
            # MLflow's defaults but the interval: one sample per logging, as ours
            bare = {**base, "MLFLOW_SYSTEM_METRICS_SAMPLING_INTERVAL": str(interval),
                    "MLFLOW_SYSTEM_METRICS_SAMPLES_BEFORE_LOGGING": "1"}
            procs[f"mlflow-{interval:g}"] = start([sys.executable, "-c", BARE, uri, runs[f"mlflow-{interval:g}"]], bare)
        for name, p in procs.items():  # started together: one start-up's wait, not four
            ready(name, p)
        time.sleep(SLOW + 1)  # warm-up: every process's first sample and first write
        before = {name: cpu_s(p.pid) for name, p in procs.items()}
        t0 = time.monotonic()
        time.sleep(WINDOW * SLOW)
        after = {name: cpu_s(p.pid) for name, p in procs.items()}
        wall = time.monotonic() - t0
        for name, p in procs.items():
            if p.poll() is not None:
                raise RuntimeError(f"{name} ended during the window (exit {p.returncode})")
        return {name: (before[name], 100.0 * (after[name] - before[name]) / wall) for name in procs}
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in procs.values():
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def main() -> int:
    args = begin(repeat=3)
    got: dict[str, list[tuple[float, float]]] = {}
    error = ""
    with tempfile.TemporaryDirectory(prefix="distcomp-bench-sysmetrics-") as work:
        uri = f"sqlite:///{Path(work) / 'mlflow.db'}"
        import mlflow

        client = mlflow.MlflowClient(uri)
        experiment = client.create_experiment("system-metrics-benchmark")
        try:
            for _ in range(args.repeat):
                names = [f"{who}-{i:g}" for who in ("ours", "mlflow") for i in (SLOW, FAST)]
                runs = {name: client.create_run(experiment, run_name=name).info.run_id for name in names}
                for name, value in one_round(uri, runs).items():
                    got.setdefault(name, []).append(value)
        except (RuntimeError, OSError) as exc:
            error = str(exc)
    rows = []
    for interval, judge in ((SLOW, seconds_at_most(1.0)), (FAST, None)):
        ours, raw = got.get(f"ours-{interval:g}", []), got.get(f"mlflow-{interval:g}", [])
        rows.append(Row(f"system metrics every {interval:g} s: CPU s per 100 s (% of a core), one node",
                        "mlflow's monitor", [pct for _s, pct in ours], [pct for _s, pct in raw], judge, error=error,
                        notes={"CPU s before the window (start-up, first sample), distcomp": [s for s, _p in ours],
                               "CPU s before the window (start-up, first sample), mlflow": [s for s, _p in raw]},
                        key=f"system-metrics-{interval:g}s"))
    return args.finish(rows)


if __name__ == "__main__":
    sys.exit(main())
