"""The ray target against the same job written by hand, on the real two-node dev cluster.

(a) wall time of `distcomp submit --target ray` of a 2 x 1 torch all-reduce (the ray test job,
    --no-tracking: the hand-written job tracks nothing either), waiting for its end, against
    the same job written by hand with Ray's own tools: the Jobs API (`submit_job` with the code
    as working_dir, then `get_job_status` every 0.5 s) and a driver that reserves a
    STRICT_SPREAD placement group, learns node 0's address and a free port, and runs the rank
    script once per bundle with torchrun's env set by hand. Goal: ratio <= 1.1.
(b) the same two when rank 1 fails at once (rank 0 waits for it in init_process_group): the
    wall time from submitting to the submitter's return, which holds the time from the
    failure to the end (the hand driver ends at its first failed task, as distcomp's does).
(c) cancel of a running 2-node job: `distcomp cancel ray:ID` of the test job sleeping on both
    nodes (--detach, both ranks have said they run), to its return (Ray says STOPPED, every
    node's agent and rank gone), against `ray job stop ID` (which waits for STOPPED) of a plain
    Ray job whose two actors, one per node of a STRICT_SPREAD placement group, sleep. Goal: <= 5 s.

Rounds are interleaved. It starts its own dev cluster (dev/ray/cluster.sh) in a temporary
folder and stops it at the end.

    python benchmarks/ray.py [--repeat N] [--check]
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _report import Row, begin, ratio_at_most, seconds_at_most, wall  # benchmarks/_report.py

ROOT = Path(__file__).resolve().parents[1]
JOB = ROOT / "tests" / "targets" / "ray" / "jobs" / "torch"
CLUSTER = ROOT / "dev" / "ray" / "cluster.sh"
BIN = Path(sys.executable).parent

# the driver a Ray user writes for torch by hand (runs on the head, through the Jobs API)
DRIVER = '''\
import os, socket, subprocess, sys
import ray
from ray.util.placement_group import placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

ray.init()
pg = placement_group([{"CPU": 1}, {"CPU": 1}], strategy="STRICT_SPREAD")
ray.get(pg.ready())

@ray.remote(num_cpus=1)
def where():
    s = socket.socket()
    s.bind(("", 0))
    port = s.getsockname()[1]
    s.close()
    return ray.util.get_node_ip_address(), port

@ray.remote(num_cpus=1)
def rank(r, addr, port, argv):
    env = {**os.environ, "RANK": str(r), "LOCAL_RANK": "0", "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "1",
           "NODE_RANK": str(r), "GROUP_RANK": str(r), "MASTER_ADDR": addr, "MASTER_PORT": str(port),
           "OMP_NUM_THREADS": "1", "TORCHELASTIC_RESTART_COUNT": "0", "TORCHELASTIC_MAX_RESTARTS": "0"}
    return subprocess.run(argv, env=env).returncode

on = [PlacementGroupSchedulingStrategy(pg, placement_group_bundle_index=i) for i in range(2)]
addr, port = ray.get(where.options(scheduling_strategy=on[0]).remote())
argv = [sys.executable, "rank.py", "--out", sys.argv[1], "--fail-rank", sys.argv[2]]
tasks = [rank.options(scheduling_strategy=on[i]).remote(i, addr, port, argv) for i in range(2)]
while tasks:
    done, tasks = ray.wait(tasks)
    if ray.get(done[0]) != 0:  # the first failure ends the job
        for t in tasks:
            ray.cancel(t, force=True)
        sys.exit(1)
'''

# the submitter: the Jobs API, polled every 0.5 s
SUBMIT = '''\
import sys, time
from ray.job_submission import JobStatus, JobSubmissionClient
client = JobSubmissionClient(sys.argv[1])
job = client.submit_job(entrypoint=f"python hand_driver.py {sys.argv[3]} {sys.argv[4]}",
                        runtime_env={"working_dir": sys.argv[2]})
while not (status := client.get_job_status(job)).is_terminal():
    time.sleep(0.5)
sys.exit(0 if status == JobStatus.SUCCEEDED else 1)
'''


# the plain Ray job that `ray job stop` stops: two actors, one per node, sleeping
SLEEPER = '''\
import ray
from ray.util.placement_group import placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

ray.init()
pg = placement_group([{"CPU": 1}, {"CPU": 1}], strategy="STRICT_SPREAD")
ray.get(pg.ready())

@ray.remote(num_cpus=1)
class Rank:
    def run(self, seconds):
        import time
        time.sleep(seconds)

ranks = [Rank.options(scheduling_strategy=PlacementGroupSchedulingStrategy(pg, placement_group_bundle_index=i)).remote()
         for i in range(2)]
ray.get([r.__ray_ready__.remote() for r in ranks])
refs = [r.run.remote(600) for r in ranks]
print("both ranks run", flush=True)
ray.get(refs)
'''
RUNNING_WAIT = 180.0  # seconds a job gets to say that both its ranks run


def jobs_api(address: str, route: str) -> Any:
    """One GET of the Jobs API (urllib: this file's name hides the ray package from it)."""
    import json
    import urllib.request

    with urllib.request.urlopen(f"{address}/api/jobs/{route}", timeout=30) as r:
        return json.loads(r.read().decode("utf-8"))


def running(address: str, job: str, needles: tuple[str, ...]) -> None:
    """Until the job's log has each of ``needles``; RuntimeError if it ends or takes too long."""
    deadline = time.monotonic() + RUNNING_WAIT
    while time.monotonic() < deadline:
        log = str(jobs_api(address, f"{job}/logs").get("logs") or "")
        if all(n in log for n in needles):
            return
        if jobs_api(address, job).get("status") in ("SUCCEEDED", "FAILED", "STOPPED"):
            raise RuntimeError(f"job {job} ended before its ranks ran:\n{log[-800:]}")
        time.sleep(0.3)
    raise RuntimeError(f"job {job}: its ranks did not say they run within {RUNNING_WAIT:g} s")


def cancel_row(address: str, work: Path, out: Path, env: dict[str, str], repeat: int) -> Row:
    """(c): `distcomp cancel` of a running 2-node job against `ray job stop` of a plain one."""
    sleeper = work / "sleeper"
    sleeper.mkdir(exist_ok=True)
    (sleeper / "sleeper.py").write_text(SLEEPER)
    ours: list[float] = []
    raw: list[float] = []
    label = "`ray job stop`, plain 2-actor job"
    try:
        for n in range(repeat):
            proc = subprocess.run([str(BIN / "distcomp"), "submit", "--target", "ray", str(JOB / "component.yaml"),
                                   "--nodes", "2", "--output", f"result={out}", "--no-tracking", "--detach",
                                   "--input", "sleep=600"], capture_output=True, text=True, env=env)
            if proc.returncode != 0:
                raise RuntimeError(f"distcomp submit --detach failed: {proc.stderr[-800:]}")
            job = proc.stdout.strip()
            running(address, job.removeprefix("ray:"), ("[rank0] rank 0 of 2 on", "[rank1] rank 1 of 2 on"))
            ours.append(wall([str(BIN / "distcomp"), "cancel", job], env))
            plain = f"bench-sleeper-{os.getpid()}-{n}"
            wall([str(BIN / "ray"), "job", "submit", "--address", address, "--no-wait", "--submission-id", plain,
                  "--working-dir", str(sleeper), "--", "python", "sleeper.py"], env)
            running(address, plain, ("both ranks run",))
            raw.append(wall([str(BIN / "ray"), "job", "stop", "--address", address, plain], env))
        return Row("ray cancel, running 2-node job", label, ours, raw, seconds_at_most(5.0))
    except RuntimeError as exc:
        return Row("ray cancel, running 2-node job", label, ours, raw, seconds_at_most(5.0), error=str(exc))


def hand_code(work: Path) -> Path:
    code = work / "hand-code"
    if not code.is_dir():
        shutil.copytree(JOB, code)
        (code / "hand_driver.py").write_text(DRIVER)
    (work / "hand_submit.py").write_text(SUBMIT)
    return code


def failing(argv: list[str], env: dict[str, str]) -> float:
    """Seconds a submit that must fail takes; RuntimeError if it succeeds."""
    start = time.perf_counter()
    proc = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    if proc.returncode == 0:
        raise RuntimeError(f"{' '.join(argv[:4])} succeeded; rank 1 should have failed")
    return time.perf_counter() - start


def main() -> int:
    args = begin()
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="distcomp-bench-ray-") as tmp:
        work = Path(tmp)
        cluster = work / "cluster"
        # the cluster's processes run the venv's python (the Jobs API's driver: `python`)
        env = {**os.environ, "PYTHONWARNINGS": "ignore", "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
        for name in ("MLFLOW_TRACKING_URI", "MLFLOW_RUN_ID", "RAY_ADDRESS"):
            env.pop(name, None)
        start = subprocess.run(["bash", str(CLUSTER), "start", str(cluster)], capture_output=True, text=True, env=env)
        if start.returncode != 0:
            print(f"no Ray cluster here: {start.stderr.strip()}")
            return 2
        address = start.stdout.strip().rpartition("=")[2]
        env["RAY_ADDRESS"] = address
        out = work / "out"
        out.mkdir()
        code = hand_code(work)
        ours_argv = [str(BIN / "distcomp"), "submit", "--target", "ray", str(JOB / "component.yaml"), "--nodes", "2",
                     "--output", f"result={out}", "--no-tracking"]
        hand_argv = [sys.executable, str(work / "hand_submit.py"), address, str(code), str(out)]
        try:
            for label, fail in (("ray submit, 2x1 torch", "-1"), ("ray rank failure, to the return", "1")):
                ours: list[float] = []
                raw: list[float] = []
                try:
                    run = wall if fail == "-1" else failing
                    run([*ours_argv, "--input", f"fail_rank={fail}"], env)  # warm: each node's first start
                    for _ in range(args.repeat):
                        ours.append(run([*ours_argv, "--input", f"fail_rank={fail}"], env))
                        raw.append(run([*hand_argv, fail], env))
                    rows.append(Row(label, "Jobs API + placement group by hand", ours, raw, ratio_at_most(1.1)))
                except RuntimeError as exc:
                    rows.append(Row(label, "Jobs API + placement group by hand", ours, raw, ratio_at_most(1.1),
                                    error=str(exc)))
            rows.append(cancel_row(address, work, out, env, args.repeat))
        finally:
            subprocess.run(["bash", str(CLUSTER), "stop", str(cluster)], capture_output=True, text=True, env=env)
    return args.finish(rows)


if __name__ == "__main__":
    sys.exit(main())
