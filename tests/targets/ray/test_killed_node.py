"""A node that dies mid-job (its raylet killed) is a preemption (issue 36): the job starts again
on both nodes once a node takes the lost one's place, without using one of --max-restarts, in the
same MLflow run; when none does within --placement-timeout, it fails with that reason, not a
hang, and leaves no rank running on either node. On clusters of their own: the session's keeps
both nodes."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pytest

from .conftest import QUICK_NODE_DEATH, TORCH, cluster, distcomp, marked, ray_env


def _raylet_of(node: str, folder: Path) -> int:
    """The pid of node ``node``'s raylet in the cluster of ``folder`` (by its processes' marks)."""
    want = {f"DISTCOMP_RAY_CLUSTER={folder}".encode(), f"DISTCOMP_RAY_NODE={node}".encode()}
    for pid in (p for p in os.listdir("/proc") if p.isdigit()):
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = set(f.read().split(b"\0"))
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv0 = f.read().split(b"\0")[0]
        except OSError:
            continue
        if want <= env and os.path.basename(argv0) == b"raylet":
            return int(pid)
    raise AssertionError(f"no raylet of node {node} in {folder}")


def _running(env: dict[str, str], tmp_path: Path, *flags: str) -> str:
    """A 2-node job whose ranks sleep, once both have started: its id."""
    proc = distcomp(env, "submit", str(TORCH), "--target", "ray", "--nodes", "2", "--output",
                    f"result={tmp_path / 'out'}", "-i", "sleep=600", "--detach", *flags, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    job = proc.stdout.strip()
    deadline = time.monotonic() + 300  # a bound on the wait for the ranks, not a timing assertion
    while len(list((tmp_path / "out").glob("rank*.json"))) < 2 and time.monotonic() < deadline:
        time.sleep(0.5)
    assert (tmp_path / "out" / "rank1.json").is_file(), distcomp(env, "logs", job).stdout
    return job


def _ended(env: dict[str, str], job: str) -> dict:
    """The job's status once it is no longer running (a bound of 300 s, not a timing assertion)."""
    deadline = time.monotonic() + 300

    def state() -> dict:
        waited = distcomp(env, "status", job, "--json")
        # while a lost head's processes go, its Jobs API may fail to answer once (exit 1 with a
        # line saying so, nothing on stdout): asked again, as a user would
        if not waited.stdout.strip() and time.monotonic() < deadline:
            return {"state": "running", "said": waited.stderr}
        assert waited.stdout.strip(), waited.stderr
        return json.loads(waited.stdout)

    outcome = state()
    while outcome["state"] == "running" and time.monotonic() < deadline:
        time.sleep(1)
        outcome = state()
    return outcome


def _ranks(out: Path) -> list[dict[str, object]]:
    return [json.loads(p.read_text()) for p in sorted(out.glob("rank*.json"))]


def _wait_ranks(out: Path, deadline: float, want: object) -> list[dict[str, object]]:
    """The ranks' records once both ranks of restart ``want`` wrote theirs (a bound on the wait)."""
    while time.monotonic() < deadline:
        try:
            ranks = _ranks(out)
        except ValueError:  # a rank is writing it now
            ranks = []
        if len(ranks) == 2 and all(r["restart"] == want for r in ranks):
            return ranks
        time.sleep(0.5)
    raise AssertionError(f"the ranks of restart {want} did not both start: {_ranks(out)}")


def _join(folder: Path, name: str) -> None:
    """A third node joins the cluster of ``folder``, with its marks (cluster.sh stop ends it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        agent = s.getsockname()[1]
    env = {**os.environ, "DISTCOMP_RAY_CLUSTER": str(folder), "DISTCOMP_RAY_NODE": name, "RAY_USAGE_STATS_ENABLED": "0",
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    proc = subprocess.run([str(Path(sys.executable).with_name("ray")), "start", "--address",
                           (folder / "gcs").read_text().strip(), "--num-cpus", "1", "--dashboard-agent-listen-port",
                           str(agent), "--object-store-memory", "100000000", "--disable-usage-stats"],
                          env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def _commands(pids: list[int]) -> dict[int, str]:
    """What each of ``pids`` still alive runs (for a failing assertion's message)."""
    out = {}
    for pid in pids:
        try:
            out[pid] = " ".join(psutil.Process(pid).cmdline())[:200]
        except psutil.Error:  # gone meanwhile
            continue
    return out


def _clean(job: str) -> None:
    """The lost node's job folder: its actor died before it could remove it (on a real cluster it
    goes with the node; here the nodes share this machine's /tmp)."""
    for record in Path(tempfile.gettempdir()).glob("distcomp-ray-node*/node.json"):
        if json.loads(record.read_text()).get("job") == job.removeprefix("ray:"):
            shutil.rmtree(record.parent)


@pytest.mark.slow
def test_a_killed_node_no_other_replaces_fails_the_job_with_the_reason_and_leaves_no_rank(tmp_path: Path) -> None:
    with cluster(**QUICK_NODE_DEATH) as (address, folder):
        env = ray_env(address, tmp_path)
        job = _running(env, tmp_path, "--placement-timeout", "20")
        # the worker node n2 is lost (the head, n1, holds the Jobs API and the driver: its loss is the
        # cluster's); which job node it is depends on where Ray put the bundles
        ranks = [json.loads(p.read_text()) for p in sorted((tmp_path / "out").glob("rank*.json"))]
        index = next(r["rank"] for r in ranks if r["node"] == "n2")
        os.kill(_raylet_of("n2", folder), signal.SIGKILL)
        outcome = _ended(env, job)
        assert outcome["state"] == "failed", outcome
        assert outcome["root_cause"].startswith(f"node {index} (") and "was lost mid-job" in outcome["root_cause"], outcome
        # a preemption: the job waited for a node to take the lost one's place, not for --max-restarts
        assert "(no node took its place within 20 s (--placement-timeout)" in outcome["root_cause"], outcome
        assert outcome["restarts"] == [f"attempt 1 was preempted: {outcome['root_cause'].splitlines()[0]}"], outcome
        assert marked(job.removeprefix("ray:")) == []
    _clean(job)


@pytest.mark.slow
def test_a_lost_head_fails_the_job_though_ray_calls_it_running(tmp_path: Path) -> None:
    with cluster(**QUICK_NODE_DEATH) as (address, folder):
        env = ray_env(address, tmp_path)
        job = _running(env, tmp_path)
        os.kill(_raylet_of("n1", folder), signal.SIGKILL)  # the head: its Jobs API lives on, its driver dies
        outcome = _ended(env, job)
        assert outcome["state"] == "failed", outcome
        assert outcome["root_cause"].startswith("the head node, where the job's driver ran (") and \
            "was lost, and the driver with it" in outcome["root_cause"], outcome
        # cancel is no traceback: the job has ended as far as distcomp can tell
        cancelled = distcomp(env, "cancel", job)
        assert "Traceback" not in cancelled.stderr and "was lost" in cancelled.stdout + cancelled.stderr, cancelled
        # the other node's actor died with its owner (the driver): its agent stopped its rank. Ray
        # tells that node of the owner's death only after the GCS has called the head dead, and each
        # process on the way (actor, guard, agent, rank) ends in turn: at a load of 5 on 2 cores that
        # took over a minute once, so the bound is the other waits' 300 s, not a timing assertion
        deadline = time.monotonic() + 300
        while marked(job.removeprefix("ray:")) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert not (left := _commands(marked(job.removeprefix("ray:")))), left
        run = json.loads(distcomp(env, "status", job, "--json").stdout)
        assert run["state"] == "failed"
    _clean(job)


@pytest.mark.slow
def test_a_lost_node_restarts_the_job_on_the_node_that_takes_its_place_in_the_same_run(tmp_path: Path) -> None:
    from mlflow import MlflowClient

    with cluster(**QUICK_NODE_DEATH) as (address, folder):
        env = ray_env(address, tmp_path)
        out = tmp_path / "out"
        proc = distcomp(env, "submit", str(TORCH), "--target", "ray", "--nodes", "2", "--output", f"result={out}",
                        "-i", "sleep=600", "--max-restarts", "0", "--detach", cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        job = proc.stdout.strip()
        deadline = time.monotonic() + 300  # a bound on the waits, not a timing assertion
        first = _wait_ranks(out, deadline, 0)
        assert sorted(str(r["node"]) for r in first) == ["n1", "n2"]
        index = next(r["rank"] for r in first if r["node"] == "n2")
        os.kill(_raylet_of("n2", folder), signal.SIGKILL)
        _join(folder, "n3")
        again = _wait_ranks(out, deadline + 300, 1)
        assert sorted(str(r["node"]) for r in again) == ["n1", "n3"]  # the lost bundle, placed again on n3
        log = distcomp(env, "logs", job).stdout
        # --max-restarts 0: a lost node is a preemption, which uses none
        assert ("distcomp ray: restarting every rank after a lost node (not counted against --max-restarts): "
                f"node {index} (") in log, log
        assert "was lost mid-job" in log.split("restarting every rank", 1)[1].splitlines()[0], log
        cancel = distcomp(env, "cancel", job)
        assert cancel.returncode == 0, cancel.stdout + cancel.stderr
        status = json.loads(distcomp(env, "status", job, "--json").stdout)
        assert status["state"] == "cancelled" and status["details"]["restarts"] == 1, status
        assert status["restarts"][0].startswith(f"attempt 1 was preempted: node {index} ("), status
        # one MLflow run for both attempts, ended once, with the restart and its cause
        run = MlflowClient(env["MLFLOW_TRACKING_URI"]).get_run(status["tracking"]["run_id"])
        assert run.info.status == "KILLED" and run.data.tags["distcomp.restarts"] == "1", run.data.tags
        assert run.data.tags["distcomp.restart.1"] == status["restarts"][0]
        assert marked(job.removeprefix("ray:")) == []  # every agent and rank, on n1 and n3
        _clean(job)
        # cancel while a restart waits for a node to take a lost one's place: the job ends, nothing runs
        shutil.rmtree(out)
        out.mkdir()
        proc = distcomp(env, "submit", str(TORCH), "--target", "ray", "--nodes", "2", "--output", f"result={out}",
                        "-i", "sleep=600", "--max-restarts", "1", "--detach", cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        job = proc.stdout.strip()
        _wait_ranks(out, time.monotonic() + 300, 0)
        os.kill(_raylet_of("n3", folder), signal.SIGKILL)
        log = ""
        while "restarting every rank" not in log and time.monotonic() < deadline + 600:
            time.sleep(1)
            log = distcomp(env, "logs", job).stdout
        assert "distcomp ray: restarting every rank after a lost node (not counted against --max-restarts): node " \
            in log, log
        cancel = distcomp(env, "cancel", job)
        assert cancel.returncode == 0, cancel.stdout + cancel.stderr
        assert json.loads(distcomp(env, "status", job, "--json").stdout)["state"] == "cancelled"
        assert marked(job.removeprefix("ray:")) == []
    _clean(job)
