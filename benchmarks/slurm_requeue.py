"""Time a requeue costs a long Slurm job (issue 36), on the real two-node dev cluster.

The job is tests/targets/slurm/jobs/longjob (2 nodes x 1 torch rank, gloo), which checkpoints
every step (the checkpoint interval: --interval seconds a step) and notes, per attempt, where it
started, its last step and when its first step was done. Mid-job, `scontrol requeue` (as a
preemption does); the job comes back and resumes from its checkpoint. Per round:

- work lost: from the last checkpoint to the requeue (the step under way), plus the steps the
  requeued attempt had done that the next one did again (none with a checkpoint each step), in
  seconds (steps x interval);
- restart overhead: from the next attempt's start (its batch script's, `attempts.json`) to its
  first step done, less one interval: the agents, the ranks' start (python, torch, gloo's
  rendezvous), the checkpoint's load; beside it (the "raw" column), the job's first start
  measured the same way.

Goal: work lost <= one checkpoint interval, and overhead <= 10 s. Not counted: the time Slurm holds
a requeued job back before it may run again (BeginTime: `AuthInfo=cred_expire`, plus the
scheduler's cycle; about a minute on the dev cluster), which is the cluster's, not the job's.
Median of --repeat rounds (default 3). It starts its own dev cluster in a temporary folder.

    DISTCOMP_BENCH_INTERVAL=2 python benchmarks/slurm_requeue.py [--repeat N] [--check]
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _report import Row, begin, seconds_at_most  # benchmarks/_report.py

ROOT = Path(__file__).resolve().parents[1]
JOB = ROOT / "tests" / "targets" / "slurm" / "jobs" / "longjob" / "component.yaml"
CLUSTER = ROOT / "dev" / "slurm" / "cluster.sh"
BIN = Path(sys.executable).parent
INTERVAL = float(os.environ.get("DISTCOMP_BENCH_INTERVAL", "2"))  # seconds a step (and a checkpoint)


def _notes(folder: Path, attempt: int) -> list[dict[str, float]]:
    seen = folder / "checkpoint" / "seen"
    return [json.loads(p.read_text()) for p in seen.glob(f"attempt{attempt}.rank*.json")] if seen.is_dir() else []


def one_round(env: dict[str, str], jobs: Path, interval: float) -> tuple[float, float, float]:
    """(seconds of work lost, seconds of restart overhead, seconds of the first start's) of one
    requeued job."""
    before = set(jobs.iterdir()) if jobs.is_dir() else set()
    argv = [str(BIN / "distcomp"), "submit", "--target", "slurm", str(JOB), "--nodes", "2", "--job-dir", str(jobs),
            "--no-tracking", "--detach", "-i", "steps=12", "-i", f"step_s={interval}"]
    out = subprocess.run(argv, capture_output=True, text=True, env=env)
    if out.returncode != 0:
        raise RuntimeError(f"submit failed: {out.stderr[-800:]}")
    job_id = out.stdout.strip().splitlines()[-1].removeprefix("slurm:")
    (folder,) = [p for p in jobs.iterdir() if p not in before and p.name.startswith("slurm-long-job-")]
    deadline = time.monotonic() + 180
    while not (len(notes := _notes(folder, 0)) == 2 and all(n["last"] >= 3 for n in notes)):
        if time.monotonic() > deadline:
            raise RuntimeError("the job's first attempt did not get to step 3")
        time.sleep(0.1)
    time.sleep(interval / 2)  # mid-step: what a preemption at a random time costs on average
    saved = (folder / "checkpoint" / "state.pt").stat().st_mtime
    requeued = time.time()
    subprocess.run(["scontrol", "requeue", job_id], check=True, capture_output=True, env=env)
    status = subprocess.run([str(BIN / "distcomp"), "status", f"slurm:{job_id}"], capture_output=True, text=True,
                            env=env)
    deadline = time.monotonic() + 400
    while "succeeded" not in status.stdout:
        if time.monotonic() > deadline or any(w in status.stdout for w in ("failed", "cancelled", "timed_out")):
            raise RuntimeError(f"the requeued job did not succeed: {status.stdout}{status.stderr[-400:]}")
        time.sleep(1)
        status = subprocess.run([str(BIN / "distcomp"), "status", f"slurm:{job_id}"], capture_output=True,
                                text=True, env=env)
    first, second = _notes(folder, 0), _notes(folder, 1)
    if len(first) != 2 or len(second) != 2:
        raise RuntimeError(f"expected 2 attempts of 2 ranks each: {first} {second}")
    done = min(int(n["last"]) for n in first)  # what both ranks had finished when the requeue came
    start = min(int(n["start"]) for n in second)
    begun = [float(t) for t in json.loads((folder / "attempts.json").read_text())["begun"]]
    restart = max(float(n["first_step_done"]) for n in second) - begun[1] - interval
    first_start = max(float(n["first_step_done"]) for n in first) - begun[0] - interval
    return requeued - saved + max(0, done + 1 - start) * interval, restart, first_start


def main() -> int:
    args = begin(repeat=3)
    interval = INTERVAL
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="distcomp-bench-requeue-") as tmp:
        work = Path(tmp)
        cluster = work / "cluster"
        cluster.mkdir()
        work.chmod(0o755)  # munged runs as user munge and must reach its socket
        start = subprocess.run(["bash", str(CLUSTER), "start", str(cluster)], capture_output=True, text=True)
        if start.returncode != 0:
            print(f"no Slurm cluster here: {start.stderr.strip()}")
            return 2
        env = {**os.environ, "SLURM_CONF": str(cluster / "slurm.conf"), "PYTHONWARNINGS": "ignore",
               "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
        env.pop("MLFLOW_TRACKING_URI", None)
        lost: list[float] = []
        overhead: list[float] = []
        first: list[float] = []
        error = ""
        try:
            for _ in range(args.repeat):
                r, o, f = one_round(env, work / "jobs", interval)
                lost.append(r)
                overhead.append(o)
                first.append(f)
        except RuntimeError as exc:
            error = str(exc)
        finally:
            subprocess.run(["bash", str(CLUSTER), "stop", str(cluster)], capture_output=True, text=True)
    rows.append(Row(f"slurm requeue: work lost (interval {interval:g} s)", "one interval", lost,
                    [interval] * len(lost), seconds_at_most(interval), error=error, key="slurm-requeue-lost"))
    rows.append(Row("slurm requeue: restart overhead", "ranks' first start", overhead, first, seconds_at_most(10.0),
                    error=error, key="slurm-requeue-overhead"))
    return args.finish(rows)


if __name__ == "__main__":
    sys.exit(main())
