"""The one job-state vocabulary: what each state means to MLflow and to an exit code, the word
earlier versions stored, and a JobOutcome as the CLI and the Python API report it."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from distcomp.records import JobOutcome, JobState, TrackingRef


@pytest.mark.parametrize("state, mlflow, code", [
    ("succeeded", "FINISHED", 0), ("failed", "FAILED", 1), ("timed_out", "FAILED", 124),
    ("cancelled", "KILLED", 128 + signal.SIGINT), ("pending", "SCHEDULED", 1), ("running", "RUNNING", 1),
    ("unknown", "RUNNING", 1)])
def test_each_state_maps_to_mlflow_and_an_exit_code(state: str, mlflow: str, code: int) -> None:
    s = JobState(state)
    assert s == state and str(s) == state  # the stored word compares equal
    assert s.mlflow_status == mlflow and s.exit_code() == code
    assert s.terminal == (state in ("succeeded", "failed", "timed_out", "cancelled"))


def test_a_cancelled_job_exits_with_its_signal() -> None:
    assert JobState.CANCELLED.exit_code(signal.SIGTERM) == 128 + signal.SIGTERM


def test_the_word_earlier_versions_stored_is_read_as_cancelled() -> None:
    assert JobState.parse("interrupted") is JobState.CANCELLED
    assert JobOutcome("local:/r", "interrupted").state is JobState.CANCELLED  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        JobState.parse("exploded")


def test_outcome_json_and_summary() -> None:
    ok = JobOutcome("local:/r", JobState.SUCCEEDED, 0, outputs={"model": "/o/m"}, wall_s=3.14,
                    tracking=TrackingRef("abc", "http://127.0.0.1:5000", "1"))
    assert ok.summary() == "local:/r: succeeded in 3.1 s" and ok.done and ok.succeeded
    record = ok.to_json()
    assert json.loads(json.dumps(record)) == record
    assert record["tracking"] == {"run_id": "abc", "tracking_uri": "http://127.0.0.1:5000", "experiment_id": "1"}
    bad = JobOutcome("kubeflow:ml/PyTorchJob/x", JobState.FAILED, 1, root_cause="rank 1 (worker) exited 3\nlast",
                     message="Failed")
    assert bad.summary() == "kubeflow:ml/PyTorchJob/x: failed: rank 1 (worker) exited 3"
    running = JobOutcome("j", JobState.RUNNING, message="Running", wall_s=9.0)
    assert running.summary() == "j: running: Running" and not running.done  # no wall time until it ends
    with pytest.raises(TypeError):
        ok.outputs["model"] = "elsewhere"  # type: ignore[index]


def test_status_reads_a_run_folder_an_earlier_version_wrote(tmp_path: Path) -> None:
    (tmp_path / "status.json").write_text(json.dumps({
        "state": "interrupted", "exit_code": 130, "message": "interrupted by signal 2 (SIGINT)",
        "wall_s": 1.5, "supervisor": {"pid": 1, "started": 0}}))
    proc = subprocess.run([sys.executable, "-m", "distcomp", "status", str(tmp_path), "--json"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    record = json.loads(proc.stdout)
    assert record["state"] == "cancelled" and record["exit_code"] == 130 and record["wall_s"] == 1.5
