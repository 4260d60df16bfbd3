"""A real two-node Ray cluster for this package's tests (dev/ray/cluster.sh in a tmp folder):
started by the first, stopped after the last, so its daemons do not idle through the rest of the run.

The cluster's processes get the venv's bin first on PATH: the Jobs API runs the driver with the
cluster's ``python`` (one that has ray), as on a cluster where Ray is installed. Each node's
processes carry DISTCOMP_RAY_NODE=n1|n2, which reaches the ranks there. Where the cluster cannot
be had (exit 3), the tests fail with the script's reason."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest

from .._jobs import clean_env

REPO = Path(__file__).resolve().parents[3]
CLUSTER = REPO / "dev" / "ray" / "cluster.sh"
JOBS = Path(__file__).resolve().parent / "jobs"
TORCH = JOBS / "torch" / "component.yaml"


# Ray's GCS calls a node dead after 5 failed health checks 3 s apart (15 s); the clusters whose
# tests kill a node check every second, 3 times, so each loss costs ~3 s of the suite, not ~15 s.
QUICK_NODE_DEATH = {"RAY_health_check_period_ms": "1000", "RAY_health_check_failure_threshold": "3"}


@contextmanager
def cluster(**settings: str) -> Iterator[tuple[str, Path]]:
    """A fresh two-node cluster: its Jobs API address and its folder; stopped at the end.
    ``settings``: Ray's own variables for its processes (e.g. QUICK_NODE_DEATH)."""
    # a short path: Ray's unix sockets live under the cluster's temp dir
    folder = Path(tempfile.mkdtemp(prefix="dray-"))
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}", **settings}
    for name in ("RAY_ADDRESS", "MLFLOW_TRACKING_URI", "MLFLOW_RUN_ID"):
        env.pop(name, None)
    proc = subprocess.run(["bash", str(CLUSTER), "start", str(folder)], capture_output=True, text=True, timeout=300,
                          env=env)
    try:
        if proc.returncode != 0:
            pytest.fail(f"dev/ray/cluster.sh start exited with {proc.returncode}:\n{proc.stderr}{proc.stdout}",
                        pytrace=False)
        yield proc.stdout.strip().rpartition("=")[2], folder
    finally:
        subprocess.run(["bash", str(CLUSTER), "stop", str(folder)], capture_output=True, text=True, timeout=120)
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="package")
def ray_cluster() -> Iterator[str]:
    """The package's cluster: its Jobs API address (http://127.0.0.1:PORT)."""
    with cluster() as (address, _folder):
        yield address


def ray_env(address: str | None, tmp: Path, **extra: str) -> dict[str, str]:
    """What a user's shell has: RAY_ADDRESS, an MLflow store every node reaches (this host's)."""
    env = clean_env(MLFLOW_TRACKING_URI=f"sqlite:///{tmp / 'mlflow.db'}", **extra)
    env.pop("MLFLOW_RUN_ID", None)
    env.pop("RAY_ADDRESS", None)
    if address:
        env["RAY_ADDRESS"] = address
    return env


def distcomp(env: dict[str, str], *args: str, cwd: Path | None = None,
             timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "distcomp", *args], env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=timeout)


def carrying(mark: str) -> list[int]:
    """Every process on this host whose environment has ``mark`` (NAME=VALUE)."""
    want = mark.encode()
    found = []
    for pid in (p for p in os.listdir("/proc") if p.isdigit()):
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if want in f.read().split(b"\0"):
                    found.append(int(pid))
        except OSError:
            continue
    return found


def marked(job: str) -> list[int]:
    """Every process on this host that carries the job's mark (each rank and node agent has it)."""
    return carrying(f"DISTCOMP_RAY_JOB={job}")


def one_line(proc: subprocess.CompletedProcess[str], *needles: str) -> None:
    """A user's mistake: exit 2, one line on stderr that says each of ``needles``, no traceback."""
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert all(n in lines[0] for n in needles), lines[0]
