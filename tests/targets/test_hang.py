"""A stalled local job is found and named (issue 37, ``--hang-timeout``): real torchrun ranks on
gloo, a real MLflow store. Rank 1 sleeps in a plain function while rank 0 waits in all_reduce:
the job ends within a minute, its root cause names rank 1 with its function and line and says
rank 0 waits in all_reduce, nothing is left running and the one run is FAILED. A job that beats
steadily, or has not beaten yet, is never ended."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from tests.targets._jobs import clean_env

JOB = Path(__file__).resolve().parent / "jobs" / "hang"
STALL_LINE = next(i for i, line in enumerate((JOB / "train.py").read_text().splitlines(), 1)
                  if "the line the report names" in line)
ALL_REDUCE_LINE = next(i for i, line in enumerate((JOB / "train.py").read_text().splitlines(), 1)
                       if "dist.all_reduce(grad)" in line)


def run(tmp_path: Path, *flags: str, **inputs: object) -> tuple[subprocess.CompletedProcess[str], float]:
    argv = [sys.executable, "-m", "distcomp", "run", str(JOB / "component.yaml"), "--run-dir", str(tmp_path / "run"),
            "--grace", "2", *flags]
    for name, value in inputs.items():
        argv += ["--input", f"{name}={value}"]
    env = {**clean_env(), "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'mlflow.db'}"}
    t0 = time.monotonic()
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=150, env=env, cwd=tmp_path)
    return proc, time.monotonic() - t0


def rank_pids(run_dir: Path) -> dict[str, int]:
    """The ranks' pids as each printed it, and every process status.json names (torchrun)."""
    pids = {}
    for log in (run_dir / "logs").glob("rank*.log"):
        for m in re.finditer(r"rank (\d+): pid (\d+)", log.read_text(errors="replace")):
            pids[f"rank{m.group(1)}"] = int(m.group(2))
    status = json.loads((run_dir / "status.json").read_text())
    pids.update({p["name"]: p["pid"] for p in status.get("processes", []) if p.get("pid")})
    return pids


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@pytest.mark.slow
def test_a_stalled_rank_is_named_and_the_job_ends_failed(tmp_path: Path) -> None:
    proc, took = run(tmp_path, "--hang-timeout", "10", "--experiment", "hang")
    assert proc.returncode == 1 and (tmp_path / "run" / "status.json").exists(), proc.stderr
    assert took < 60, f"took {took:.0f} s"
    status = json.loads((tmp_path / "run" / "status.json").read_text())
    assert status["state"] == "failed"
    cause = status["root_cause"]
    assert cause["name"] == "rank1", cause
    detail = cause["detail"]
    assert detail.startswith("hung: no rank made progress for "), detail
    assert f"rank1 is not in a collective: {JOB / 'train.py'}:{STALL_LINE} in stall_here" in detail, detail
    assert f"rank0 waits in all_reduce ({JOB / 'train.py'}:{ALL_REDUCE_LINE} in <module>)" in detail, detail
    assert "rank1 is not in a collective" in proc.stderr
    assert "rank1 (rank, node 0, pid " in proc.stderr and " hung and was stopped after " in proc.stderr, proc.stderr
    # every thread's stack is kept, rank 1's naming where it sleeps
    stack = (tmp_path / "run" / "stacks" / "rank1.stack").read_text()
    assert f'line {STALL_LINE} in stall_here' in stack
    pids = rank_pids(tmp_path / "run")
    assert {"rank0", "rank1"} <= set(pids), pids
    left = {name: pid for name, pid in pids.items() if alive(pid)}
    assert not left, f"still running: {left}"

    from mlflow import MlflowClient

    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    (found,) = client.search_runs([client.get_experiment_by_name("hang").experiment_id])
    assert found.info.status == "FAILED"
    failure = found.data.tags["distcomp.failure"]
    assert "hung: no rank made progress" in failure and f"train.py:{STALL_LINE} in stall_here" in failure, failure
    assert found.data.tags["distcomp.failure.process"] == "rank1"


def assert_watched_and_never_asked(run_dir: Path) -> None:
    """Each rank registered its stack dump (the job was watched), and none was asked for it."""
    stacks = {p.name: p.read_text() for p in (run_dir / "stacks").glob("*.stack")}
    assert sorted(stacks) == ["rank0.stack", "rank1.stack"], stacks
    for name, text in stacks.items():
        assert text.startswith(f"distcomp stacks: {name.removesuffix('.stack')} pid "), text
        assert "(most recent call first)" not in text, text


@pytest.mark.slow
def test_a_job_that_beats_steadily_is_never_ended(tmp_path: Path) -> None:
    proc, took = run(tmp_path, "--hang-timeout", "4", "--no-tracking", mode="steady", steps=60, step_s=0.25)
    assert proc.returncode == 0, proc.stderr
    assert took > 12  # it ran for more than three hang timeouts
    assert "hung" not in proc.stderr
    assert_watched_and_never_asked(tmp_path / "run")


@pytest.mark.slow
def test_no_beat_yet_is_no_hang(tmp_path: Path) -> None:
    """A start-up longer than the timeout (no rank has beaten): nothing fires."""
    proc, took = run(tmp_path, "--hang-timeout", "2", "--no-tracking", mode="silent", steps=30, step_s=0.2)
    assert proc.returncode == 0, proc.stderr
    assert took > 6
    assert "hung" not in proc.stderr
    assert_watched_and_never_asked(tmp_path / "run")


@pytest.mark.slow
def test_an_mpi_rank_stalled_outside_its_allreduce_is_named(tmp_path: Path) -> None:
    """mpi4py's collectives are C: rank 0's wait is told by the line that called comm.Allreduce."""
    lines = (JOB / "mpi_train.py").read_text().splitlines()
    stall = next(i for i, line in enumerate(lines, 1) if "the line the report names" in line)
    allreduce = next(i for i, line in enumerate(lines, 1) if "comm.Allreduce(" in line)
    argv = [sys.executable, "-m", "distcomp", "run", str(JOB / "mpi.yaml"), "--run-dir", str(tmp_path / "run"),
            "--grace", "2", "--no-tracking", "--hang-timeout", "5"]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=150, env=clean_env(), cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    cause = json.loads((tmp_path / "run" / "status.json").read_text())["root_cause"]
    assert cause["name"] == "rank1", cause
    assert f"rank1 is not in a collective: {JOB / 'mpi_train.py'}:{stall} in stall_here" in cause["detail"]
    assert f"rank0 waits in Allreduce ({JOB / 'mpi_train.py'}:{allreduce} in <module>)" in cause["detail"]
    pids = rank_pids(tmp_path / "run")
    assert {"rank0", "rank1"} <= set(pids), pids
    assert not {name: pid for name, pid in pids.items() if alive(pid)}
