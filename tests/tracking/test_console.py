"""A console that goes away is not a failed job: real ``distcomp run ... 2>&1 | head -N`` of a
tracked 2-rank job against a real SQLite store, the pipe closed before distcomp's first line or
after a few. The job runs to its end, its MLflow run is ended with the job's state, status.json
is final and the exit code is the job's own; nothing is left RUNNING."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from mlflow import MlflowClient

from ..targets._jobs import FAULT, WAIT, clean_env


@pytest.mark.parametrize(("mode", "lines", "state", "status", "code"), [
    ("ok", 0, "succeeded", "FINISHED", 0),  # closed before distcomp said anything
    ("chatty", 3, "succeeded", "FINISHED", 0),  # `| head -3`: closed while the ranks print
    ("exit", 3, "failed", "FAILED", 1),  # ... of a job that fails: its own exit code, not the pipe's
], ids=["closed-first", "closed-after-3", "failing-job"])
def test_a_closed_console_pipe_ends_nothing_but_the_console(sqlite_uri: str, tmp_path: Path, mode: str,
                                                            lines: int, state: str, status: str, code: int) -> None:
    run_dir = tmp_path / "run"
    argv = [sys.executable, "-m", "distcomp", "run", str(FAULT), "--run-dir", str(run_dir),
            "--input", f"mode={mode}", "--input", f"state_dir={tmp_path / 'state'}"]
    proc = subprocess.Popen(argv, cwd=tmp_path, env=clean_env(MLFLOW_TRACKING_URI=sqlite_uri),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)  # 2>&1
    assert proc.stdout is not None
    try:
        seen = [proc.stdout.readline() for _ in range(lines)]
        proc.stdout.close()  # head exits
        assert proc.wait(timeout=WAIT) == code, seen
    finally:
        if proc.poll() is None:
            proc.kill()
    record = json.loads((run_dir / "status.json").read_text())
    assert record["state"] == state
    run_id = record["mlflow"]["run_id"]
    assert record["tracking"]["run_status"] == status
    client = MlflowClient(sqlite_uri)
    run = client.get_run(run_id)
    assert run.info.status == status
    assert run.data.tags["distcomp.state"] == state
    every = client.search_runs([run.info.experiment_id])
    assert [(r.info.run_id, r.info.status) for r in every] == [(run_id, status)]  # no orphan RUNNING run
    # the logs hold what the console did not show
    assert (run_dir / "logs" / "rank0.log").read_text().count("\n") > 1


def test_a_notice_that_fails_before_the_ranks_start_ends_the_run_failed(sqlite_uri: str, tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """``distcomp.run(notify=...)`` whose callback raises right after the run was made (where a
    closed console used to stop ``distcomp run``): the error is the caller's, the run is not left
    RUNNING but ended FAILED with the reason, and no rank started."""
    import distcomp

    def notify(message: str) -> None:
        if message.startswith("MLflow run"):
            raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setenv("MLFLOW_TRACKING_URI", sqlite_uri)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(BrokenPipeError):
        distcomp.run(FAULT, inputs={"mode": "ok", "state_dir": str(tmp_path / "state")}, run_dir=str(tmp_path / "run"),
                     notify=notify)
    client = MlflowClient(sqlite_uri)
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
    assert [r.info.status for r in runs] == ["FAILED"]
    # the core's words, as for every target whose job stops before it is submitted
    assert runs[0].data.tags["distcomp.failure"] == "not submitted: [Errno 32] Broken pipe"
    assert not (tmp_path / "state").exists()
