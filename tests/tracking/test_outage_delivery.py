"""A store that goes away mid-job costs neither time nor points: a real ``distcomp run`` logs
into a real ``mlflow server`` that is killed (by its pid) mid-job, or into a SQLite database
made read-only mid-job.

The job ends within 30 s of its last rank whatever the store does; what the store did not take
waits in the run folder with the job's end, the console says how much and which command
delivers it, and ``distcomp status RUN_DIR`` / ``distcomp reap RUN_DIR`` delivers every point
and ends the run with the job's real state and end time once the store takes writes again.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import pytest
from mlflow import MlflowClient

from ..targets._jobs import clean_env
from ._probe import WAIT, distcomp
from ._server import Server

EXPERIMENT = "outage-delivery"
STEPS = 75  # each logs two points (loss, rank): 150 points over ~15 s
EVERY = 0.2
WAITING = re.compile(r"([\d,]+) metric points and the job's end \((\w+)\) wait in (\S+): `distcomp status (\S+)`")


def start(tmp_path: Path, uri: str) -> subprocess.Popen[str]:
    proc = distcomp(tmp_path, uri, "--nproc-per-node", "1", "--experiment", EXPERIMENT, wait=False,
                    points=STEPS, every=EVERY)
    assert isinstance(proc, subprocess.Popen)
    return proc


def wait_until(what: str, check: Any, proc: subprocess.Popen[str], timeout: float = WAIT) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"never saw {what}; distcomp: {proc.communicate()[1][-3000:]}")
        time.sleep(0.1)


def ended(proc: subprocess.Popen[str]) -> tuple[str, float]:
    """distcomp's stderr and the seconds from its rank's last step to the job's end."""
    try:
        _, err = proc.communicate(timeout=WAIT)
    except subprocess.TimeoutExpired:  # the old code: ranks waited out a 300 s exit flush
        proc.kill()
        proc.communicate()
        raise
    done = time.time()
    assert proc.returncode == 0, err[-4000:]  # the job itself succeeded, whatever MLflow did
    return err, done


def last_step(tmp_path: Path) -> float:
    """When rank 0 had logged its last point (it writes rank0.ready right after)."""
    return (tmp_path / "state" / "rank0.ready").stat().st_mtime


def status(tmp_path: Path) -> dict[str, Any]:
    return json.loads((tmp_path / "run" / "status.json").read_text())


def pending(tmp_path: Path) -> list[Path]:
    return sorted((tmp_path / "run" / "tracking").glob("pending-*"))


def command(*argv: str, timeout: float = WAIT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "distcomp", *argv], capture_output=True, text=True,
                          env=clean_env(), timeout=timeout)


def history(uri: str, run_id: str) -> dict[str, list[int]]:
    client = MlflowClient(uri)
    return {key: sorted(m.step for m in client.get_metric_history(run_id, key)) for key in ("loss", "rank")}


@pytest.mark.slow
def test_a_server_killed_mid_job_costs_neither_time_nor_points(own_server: Server, tmp_path: Path) -> None:
    server = own_server
    began = time.time()
    proc = start(tmp_path, server.uri)
    run_dir = tmp_path / "run"
    wait_until("the first points in the store", lambda: _stored_http(server.uri) >= 10, proc)
    server.stop()  # killed by its own pid (its process group), ~2 s into the job's 15 s of logging
    err, done = ended(proc)
    # the job ends within 30 s of its rank's last step (the old code waited out a 300 s exit flush,
    # then retried for minutes)
    assert done - last_step(tmp_path) < 30, (done - last_step(tmp_path), err[-3000:])
    assert done - began < 100, err[-3000:]  # the old code: over 300 s
    run_id = status(tmp_path)["mlflow"]["run_id"]
    assert f"MLflow run {run_id}: left RUNNING, not ended" in err and "Traceback" not in err
    # the console says how many points wait, with the job's end, and which command delivers them
    said = WAITING.search(err)
    assert said, err[-3000:]
    waiting = int(said.group(1).replace(",", ""))
    assert said.group(2) == "FINISHED" and Path(said.group(3)) == run_dir / "tracking"
    assert Path(said.group(4)) == run_dir
    assert "were not logged" not in err  # nothing is lost
    section = status(tmp_path)["tracking"]
    assert section["run_status"] == "RUNNING" and section["waiting"]["metrics"] == waiting
    assert section["undelivered"] == {"metrics": 0, "params": 0, "artifacts": 0}
    assert pending(tmp_path)

    # while the server is still away, status says so and keeps everything
    away = command("status", str(run_dir))
    assert away.returncode == 0 and "still waits" in away.stderr, away.stderr[-3000:]
    assert status(tmp_path)["tracking"]["waiting"]["metrics"] == waiting and pending(tmp_path)

    server.start()  # the same port and database
    client = MlflowClient(server.uri)
    before = history(server.uri, run_id)
    assert len(before["loss"]) + len(before["rank"]) + waiting == 2 * STEPS  # all of them: stored, or waiting
    assert client.get_run(run_id).info.status == "RUNNING"
    asked = time.time()
    back = command("status", str(run_dir))
    assert back.returncode == 0, back.stderr[-3000:]
    assert "FINISHED" in back.stderr and "succeeded" in back.stdout, back.stdout + back.stderr
    # every point delivered, once; the run ended with the job's real state and end time
    assert history(server.uri, run_id) == {"loss": list(range(STEPS)), "rank": list(range(STEPS))}
    run = client.get_run(run_id)
    assert run.info.status == "FINISHED" and run.data.tags["distcomp.state"] == "succeeded"
    assert run.data.params["logged_by"] == "0"
    assert run.info.end_time / 1000 < asked and run.info.end_time / 1000 >= last_step(tmp_path) - 1
    assert "distcomp.undelivered" not in run.data.tags
    assert {a.path for a in client.list_artifacts(run_id, "logs")} >= {"logs/rank0.log"}
    section = status(tmp_path)["tracking"]
    assert section["run_status"] == "FINISHED" and section["waiting"] == {"metrics": 0, "params": 0, "artifacts": 0}
    assert not pending(tmp_path) and not (run_dir / "tracking" / "pending-end.json").exists()
    # delivered once: asking again changes nothing
    again = command("status", str(run_dir))
    assert again.returncode == 0 and "delivered" not in again.stderr
    assert history(server.uri, run_id) == {"loss": list(range(STEPS)), "rank": list(range(STEPS))}


def _stored_http(uri: str) -> int:
    client = MlflowClient(uri)
    exp = client.get_experiment_by_name(EXPERIMENT)
    runs = client.search_runs([exp.experiment_id]) if exp else []
    return len(client.get_metric_history(runs[0].info.run_id, "loss")) if runs else 0


def _stored_sqlite(db: Path) -> int:
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as con:
        return con.execute("SELECT count(*) FROM metrics WHERE key = 'loss'").fetchone()[0]


@contextmanager
def read_only(db: Path) -> Iterator[Any]:
    """Make the database refuse writes while the context lasts, and again on demand: a chmod for
    a user; root writes through any mode, so for root the file is made immutable (chattr +i)."""
    root = os.geteuid() == 0

    def set_ro(on: bool) -> None:
        if root:
            subprocess.run(["chattr", "+i" if on else "-i", str(db)], check=True, capture_output=True)
        else:
            db.chmod(0o444 if on else 0o644)
            db.parent.chmod(0o555 if on else 0o755)  # no journal file either

    try:
        yield set_ro
    finally:
        set_ro(False)  # else pytest could not remove the test's folder


@pytest.mark.slow
def test_a_store_made_read_only_mid_job_is_ended_by_a_later_reap(sqlite_uri: str, tmp_path: Path) -> None:
    db = Path(sqlite_uri.removeprefix("sqlite:///"))
    began = time.time()
    proc = start(tmp_path, sqlite_uri)
    run_dir = tmp_path / "run"
    with read_only(db) as set_ro:
        wait_until("the first points in the store", lambda: _stored_sqlite(db) >= 10, proc)
        set_ro(True)
        err, done = ended(proc)
        assert done - last_step(tmp_path) < 30, (done - last_step(tmp_path), err[-3000:])
        assert done - began < 100, err[-3000:]  # the old code: over 300 s
        run_id = status(tmp_path)["mlflow"]["run_id"]
        assert status(tmp_path)["state"] == "succeeded"
        assert f"MLflow run {run_id}: left RUNNING, not ended" in err and WAITING.search(err), err[-3000:]
        # the store still refuses writes: reap says so, keeps everything, exits 1
        refused = command("reap", str(run_dir))
        assert refused.returncode == 1 and "still waits" in refused.stdout, refused.stdout + refused.stderr
        assert pending(tmp_path)
        set_ro(False)
    client = MlflowClient(sqlite_uri)
    assert client.get_run(run_id).info.status == "RUNNING"
    reaped = command("reap", str(run_dir))
    # the old code said "already ended (succeeded): nothing to do" and left the run RUNNING
    assert reaped.returncode == 0, reaped.stdout + reaped.stderr
    assert "delivered what waited" in reaped.stdout and "1 closed" in reaped.stdout, reaped.stdout
    run = client.get_run(run_id)
    assert run.info.status == "FINISHED" and run.data.tags["distcomp.state"] == "succeeded"
    assert run.info.end_time / 1000 <= done
    assert history(sqlite_uri, run_id) == {"loss": list(range(STEPS)), "rank": list(range(STEPS))}
    assert not pending(tmp_path) and status(tmp_path)["tracking"]["run_status"] == "FINISHED"
