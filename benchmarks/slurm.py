"""The slurm target against the same job written by hand, on the real two-node dev cluster.

(a) wall time of `distcomp submit --target slurm` of a 2 x 1 torch all-reduce (the slurm test
    job, --no-tracking: the hand-written job tracks nothing either), waiting for its end,
    against the same job as a hand-written sbatch script (srun of the ranks with torchrun's
    env set by hand from Slurm's variables), submitted with `sbatch --parsable` and waited for
    with `scontrol show job` every 0.5 s, from a random point of the first interval (the test
    job's run time is the same each round: polls started at sbatch would meet its end at the
    same point of the interval every round) (distcomp's poll while its job folder shows no change;
    it asks every 0.05 s for a few seconds once a replica's end is recorded there, which a
    hand-written loop has no folder to tell). Goal: ratio <= 1.1. `sbatch --wait` on the same
    script is printed beside: it polls far less often (seconds late).
(b) seconds from a rank's failure (its exit, as its node agent or wrapper recorded it) to the submitting
    command's return, for the same two: rank 1 exits 3 while rank 0 waits for it in
    init_process_group, so Slurm's --kill-on-bad-exit has to end the job. Slurm itself ends the
    hand-written job about 0.05 s after the rank's exit: the rest of its time is its poll's (the
    same job polled every 0.01 s is printed beside).

Rounds are interleaved. It starts its own dev cluster (dev/slurm/cluster.sh, root on Debian)
in a temporary folder and stops it at the end.

    python benchmarks/slurm.py [--repeat N] [--check]
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _report import Row, begin, ratio_at_most, wall  # benchmarks/_report.py

ROOT = Path(__file__).resolve().parents[1]
JOB = ROOT / "tests" / "targets" / "slurm" / "jobs" / "torch"
CLUSTER = ROOT / "dev" / "slurm" / "cluster.sh"
BIN = Path(sys.executable).parent

# the job by hand: what a Slurm user writes for torch without a launcher (the rank script
# checks its cwd is JOB_FOLDER/code, as under distcomp)
HAND = """#!/bin/bash
#SBATCH --job-name=hand-torch
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=1
#SBATCH --output={folder}/slurm-%j.out
cd {folder}/code
export MASTER_ADDR=127.0.0.1
export MASTER_PORT=$((20000 + RANDOM % 30000))
srun --kill-on-bad-exit=1 /bin/sh -c '
export RANK=$SLURM_PROCID LOCAL_RANK=$SLURM_LOCALID WORLD_SIZE=$SLURM_NTASKS LOCAL_WORLD_SIZE=1
export NODE_RANK=$SLURM_NODEID GROUP_RANK=$SLURM_NODEID DISTCOMP_TEST_MARK=torch OMP_NUM_THREADS=1
python rank.py --per-node 1 --fail-rank {fail} --out {folder}/out >{folder}/rank$SLURM_PROCID.log 2>&1
code=$?
date +%s.%N >{folder}/exit$SLURM_PROCID
exit $code'
"""


def hand_folder(work: Path, name: str, fail: int) -> Path:
    folder = work / f"slurm-test-torch-{name}"  # rank.py wants this prefix
    shutil.rmtree(folder, ignore_errors=True)
    shutil.copytree(JOB, folder / "code")
    (folder / "out").mkdir()
    (folder / "job.sbatch").write_text(HAND.format(folder=folder, fail=fail))
    return folder


def sbatch_and_poll(script: Path, env: dict[str, str], every: float = 0.5) -> tuple[float, str]:
    """Seconds from sbatch to the job's end as scontrol tells it (polled every ``every`` s), and its state.

    The polls start a random fraction of the interval after sbatch: the test job's run time is
    the same in every round, so polls that start at sbatch would meet its end at about the same
    point of the interval each round (a few hundredths of a second after it in one run of the
    benchmark, most of an interval in another), where a user's poll meets a job's end anywhere."""
    start = time.perf_counter()
    out = subprocess.run(["sbatch", "--parsable", str(script)], capture_output=True, text=True, env=env)
    if out.returncode != 0:
        raise RuntimeError(f"sbatch failed: {out.stderr[-800:]}")
    job_id = out.stdout.strip().split(";")[0]
    time.sleep(random.uniform(0, every))
    while True:
        show = subprocess.run(["scontrol", "show", "job", "-o", job_id], capture_output=True, text=True, env=env)
        state = show.stdout.partition("JobState=")[2].split(" ")[0]
        if state and state not in ("PENDING", "CONFIGURING", "RUNNING", "COMPLETING"):
            return time.perf_counter() - start, state
        time.sleep(every)


def hand_failure(script: Path, env: dict[str, str], exits: Path, every: float = 0.5) -> float:
    """Seconds from the failing rank's recorded exit to the hand-written job's end being seen."""
    _s, state = sbatch_and_poll(script, env, every)
    ended = time.time()
    if state == "COMPLETED" or not exits.is_file():
        raise RuntimeError(f"the hand-written job ended {state} without rank 1's exit record")
    return ended - float(exits.read_text().split()[0])


def main() -> int:
    args = begin()
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="distcomp-bench-slurm-") as tmp:
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
        jobs = work / "jobs"
        submit = [str(BIN / "distcomp"), "submit", "--target", "slurm", str(JOB / "component.yaml"), "--nodes", "2",
                  "--job-dir", str(jobs), "--no-tracking"]
        try:
            ours: list[float] = []
            raw: list[float] = []
            waited: list[float] = []
            try:
                wall(submit, env)  # warm: the first job pays the nodes' first start
                for i in range(args.repeat):
                    ours.append(wall(submit, env))
                    seconds, state = sbatch_and_poll(hand_folder(work, f"ok{i}", -1) / "job.sbatch", env)
                    if state != "COMPLETED":
                        raise RuntimeError(f"the hand-written job ended {state}")
                    raw.append(seconds)
                    waited.append(wall(["sbatch", "--wait", str(hand_folder(work, f"w{i}", -1) / "job.sbatch")], env))
                rows.append(Row("slurm submit, 2x1 torch", "sbatch by hand", ours, raw, ratio_at_most(1.1),
                                notes={"sbatch --wait, same script": waited}))
            except RuntimeError as exc:
                rows.append(Row("slurm submit, 2x1 torch", "sbatch by hand", ours, raw, ratio_at_most(1.1),
                                error=str(exc)))
            ours, raw = [], []
            floor: list[float] = []
            try:
                for i in range(args.repeat):
                    ours.append(_ours_failure([*submit, "--input", "fail_rank=1"], env, jobs, set(jobs.iterdir())))
                    folder = hand_folder(work, f"fail{i}", 1)
                    raw.append(hand_failure(folder / "job.sbatch", env, folder / "exit1"))
                    folder = hand_folder(work, f"floor{i}", 1)  # Slurm's own part: its end seen at once
                    floor.append(hand_failure(folder / "job.sbatch", env, folder / "exit1", every=0.01))
                rows.append(Row("slurm rank failure to end", "sbatch by hand", ours, raw, ratio_at_most(1.1),
                                notes={"the same, polled every 0.01 s": floor}))
            except RuntimeError as exc:
                rows.append(Row("slurm rank failure to end", "sbatch by hand", ours, raw, ratio_at_most(1.1),
                                error=str(exc)))
        finally:
            subprocess.run(["bash", str(CLUSTER), "stop", str(cluster)], capture_output=True, text=True)
    return args.finish(rows)


def _ours_failure(argv: list[str], env: dict[str, str], jobs: Path, before: set[Path]) -> float:
    proc = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    ended = time.time()
    if proc.returncode == 0:
        raise RuntimeError("distcomp submit succeeded; rank 1 should have failed")
    new = [p for p in jobs.iterdir() if p not in before and p.is_dir()]
    record = new[0] / "exits" / "rank1.json" if len(new) == 1 else None  # the node agent's report
    if record is None or not record.is_file():
        raise RuntimeError(f"no exit record of rank 1: {proc.stderr.decode()[-800:]}")
    return ended - float(json.loads(record.read_text())["ended"])


if __name__ == "__main__":
    sys.exit(main())
