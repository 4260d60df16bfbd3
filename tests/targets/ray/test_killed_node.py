"""A node that dies mid-job (its raylet killed) fails the job with that reason, not a hang, and
leaves no rank running on either node. On a cluster of its own: the session's keeps both nodes."""

from __future__ import annotations

import json
import os
import shutil
import signal
import tempfile
import time
from pathlib import Path

import pytest

from .conftest import TORCH, cluster, distcomp, marked, ray_env


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


def _running(env: dict[str, str], tmp_path: Path) -> str:
    """A 2-node job whose ranks sleep, once both have started: its id."""
    proc = distcomp(env, "submit", str(TORCH), "--target", "ray", "--nodes", "2", "--output",
                    f"result={tmp_path / 'out'}", "-i", "sleep=600", "--detach", cwd=tmp_path)
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
    waited = distcomp(env, "status", job, "--json")
    while json.loads(waited.stdout)["state"] == "running" and time.monotonic() < deadline:
        time.sleep(1)
        waited = distcomp(env, "status", job, "--json")
    return json.loads(waited.stdout)


def _clean(job: str) -> None:
    """The lost node's job folder: its actor died before it could remove it (on a real cluster it
    goes with the node; here the nodes share this machine's /tmp)."""
    for record in Path(tempfile.gettempdir()).glob("distcomp-ray-node*/node.json"):
        if json.loads(record.read_text()).get("job") == job.removeprefix("ray:"):
            shutil.rmtree(record.parent)


@pytest.mark.slow
def test_a_killed_node_fails_the_job_with_the_reason_and_leaves_no_rank(tmp_path: Path) -> None:
    with cluster() as (address, folder):
        env = ray_env(address, tmp_path)
        job = _running(env, tmp_path)
        # the worker node n2 is lost (the head, n1, holds the Jobs API and the driver: its loss is the
        # cluster's); which job node it is depends on where Ray put the bundles
        ranks = [json.loads(p.read_text()) for p in sorted((tmp_path / "out").glob("rank*.json"))]
        index = next(r["rank"] for r in ranks if r["node"] == "n2")
        os.kill(_raylet_of("n2", folder), signal.SIGKILL)
        outcome = _ended(env, job)
        assert outcome["state"] == "failed", outcome
        assert outcome["root_cause"].startswith(f"node {index} (") and "was lost mid-job" in outcome["root_cause"], outcome
        assert marked(job.removeprefix("ray:")) == []
    _clean(job)


@pytest.mark.slow
def test_a_lost_head_fails_the_job_though_ray_calls_it_running(tmp_path: Path) -> None:
    with cluster() as (address, folder):
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
        # the other node's actor died with its owner (the driver): its agent stopped its rank
        deadline = time.monotonic() + 60
        while marked(job.removeprefix("ray:")) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert marked(job.removeprefix("ray:")) == []
        run = json.loads(distcomp(env, "status", job, "--json").stdout)
        assert run["state"] == "failed"
    _clean(job)
