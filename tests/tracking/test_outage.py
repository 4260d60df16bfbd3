"""A job whose MLflow server goes away: a real ``mlflow server`` of the test's own, stopped and
started again on the same port and database while a real ``distcomp run`` logs into it.

Nothing logged is lost: what the server missed is delivered when it is back, by the rank, the
launcher or, after the job, ``distcomp status RUN_DIR``; what waits is counted on the rank's
stderr, on the console and in status.json. The console never names a state the store did not
accept.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

import pytest
from mlflow import MlflowClient

from ._probe import WAIT, distcomp, only_run
from ._server import Server

EXPERIMENT = "outage"


def wait_for(what: str, check: Callable[[], Any], proc: subprocess.Popen[str], timeout: float = WAIT) -> Any:
    deadline = time.monotonic() + timeout
    while not (got := check()):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"never saw {what}; distcomp: {proc.communicate()[1][-3000:]}")
        time.sleep(0.1)
    return got


def stored(uri: str) -> int:
    """Loss points stored so far in the experiment's one run (0 before it exists)."""
    client = MlflowClient(uri)
    exp = client.get_experiment_by_name(EXPERIMENT)
    runs = client.search_runs([exp.experiment_id]) if exp else []
    return len(client.get_metric_history(runs[0].info.run_id, "loss")) if runs else 0


def points(uri: str, run_id: str) -> int:
    client = MlflowClient(uri)
    return sum(len(client.get_metric_history(run_id, key)) for key in ("loss", "rank"))


def start_job(tmp_path: Path, server: Server, points: int, every: float, **env: str) -> subprocess.Popen[str]:
    proc = distcomp(tmp_path, server.uri, "--nproc-per-node", "1", "--experiment", EXPERIMENT, wait=False,
                    env=env, points=points, every=every)
    assert isinstance(proc, subprocess.Popen)
    return proc


def finish(proc: subprocess.Popen[str]) -> str:
    _, err = proc.communicate(timeout=WAIT)
    assert proc.returncode == 0, err[-4000:]  # the job itself succeeded, whatever MLflow did
    return err


def status(tmp_path: Path) -> dict[str, Any]:
    return json.loads((tmp_path / "run" / "status.json").read_text())


@pytest.mark.slow
def test_points_logged_across_an_outage_all_reach_the_run(own_server: Server, tmp_path: Path) -> None:
    server = own_server
    # the rank waits at its end for the server's return (a restart takes 10 s or more here)
    proc = start_job(tmp_path, server, points=250, every=0.04, DISTCOMP_EXIT_OUTAGE_S="120")  # ~10 s of logging
    wait_for("the first points in the store", lambda: stored(server.uri) >= 30, proc)
    server.stop()
    time.sleep(5)  # the rank goes on logging into the void
    server.start()
    err = finish(proc)
    run = only_run(server.uri, EXPERIMENT)
    history = MlflowClient(server.uri).get_metric_history(run.info.run_id, "loss")
    assert sorted(m.step for m in history) == list(range(250)), "points lost in the outage"
    assert run.info.status == "FINISHED" and f"MLflow run {run.info.run_id}: FINISHED" in err
    assert "distcomp.undelivered" not in run.data.tags
    none = {"metrics": 0, "params": 0, "artifacts": 0}
    assert status(tmp_path)["tracking"] == {"run_id": run.info.run_id, "run_status": "FINISHED", "problems": [],
                                            "undelivered": none, "waiting": none}


STEPS = 200  # each logs two points: loss and rank
WAITS = re.compile(r"([\d,]+) metric points wait in ")


def waiting(text: str) -> int:
    found = WAITS.search(text)
    assert found, text[-3000:]
    return int(found.group(1).replace(",", ""))


@pytest.mark.slow
def test_a_server_that_never_returns_loses_nothing_and_says_what_waits(own_server: Server, tmp_path: Path) -> None:
    server = own_server
    # the rank gives up 2 s after its last point, the launcher after 1 s
    proc = start_job(tmp_path, server, points=STEPS, every=0.02, DISTCOMP_EXIT_FLUSH_S="2",
                     DISTCOMP_END_WAIT_S="1")
    wait_for("the first points in the store", lambda: stored(server.uri) >= 30, proc)
    server.stop()
    err = finish(proc)
    run_id = status(tmp_path)["mlflow"]["run_id"]
    # the rank said what waits (its stderr is its log), and so did the launcher, with the command
    said = waiting((tmp_path / "run" / "logs" / "rank0.log").read_text())
    assert f"{said:,} metric points and the job's end (FINISHED) wait in" in err
    assert f"MLflow run {run_id}: left RUNNING, not ended" in err and f"MLflow run {run_id}: FINISHED" not in err
    assert "were not logged" not in err and "Traceback" not in err
    section = status(tmp_path)["tracking"]
    assert section["waiting"]["metrics"] == said and section["undelivered"]["metrics"] == 0
    assert section["run_status"] == "RUNNING"
    # the server comes back: the run holds all but what waits, and is still open
    server.start()
    client = MlflowClient(server.uri)
    assert points(server.uri, run_id) + said == 2 * STEPS
    assert client.get_run(run_id).info.status == "RUNNING"
    # the console said which command delivers the rest: it does
    hint = re.search(r"`(distcomp status \S+)`", err)
    assert hint, err[-3000:]
    done = subprocess.run([sys.executable, "-m", *hint.group(1).split()], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert client.get_run(run_id).info.status == "FINISHED" and points(server.uri, run_id) == 2 * STEPS


@pytest.mark.slow
def test_a_server_back_before_the_launcher_gives_up_gets_everything(own_server: Server, tmp_path: Path) -> None:
    server = own_server
    # the rank ends during the outage and gives up after 1 s; the launcher waits up to 2 minutes
    proc = start_job(tmp_path, server, points=STEPS, every=0.02, DISTCOMP_EXIT_FLUSH_S="1",
                     DISTCOMP_END_WAIT_S="120")
    wait_for("the first points in the store", lambda: stored(server.uri) >= 30, proc)
    server.stop()
    wait_for("the rank's report", lambda: list((tmp_path / "run" / "tracking").glob("undelivered-*.json")), proc)
    server.start()
    err = finish(proc)
    run = only_run(server.uri, EXPERIMENT)
    assert f"MLflow run {run.info.run_id}: FINISHED" in err and run.info.status == "FINISHED"
    assert "distcomp.undelivered" not in run.data.tags
    assert points(server.uri, run.info.run_id) == 2 * STEPS  # the launcher delivered what the rank left
    section = status(tmp_path)["tracking"]
    assert section["waiting"]["metrics"] == 0 and section["run_status"] == "FINISHED"
    assert not list((tmp_path / "run" / "tracking").glob("pending-*"))
