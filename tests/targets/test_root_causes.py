"""The root cause a user is shown: a rank's own @record error file (TORCHELASTIC_ERROR_FILE, set
per rank as torchrun sets it), the rank logs when the failing process (mpirun) printed nothing,
and `distcomp run --env`. Real ranks, a real MLflow store."""

from __future__ import annotations

import pytest
import json
import subprocess
import sys
from pathlib import Path

from tests.targets._jobs import clean_env

JOBS = Path(__file__).resolve().parent / "jobs" / "rootcause"


def run(spec: str, tmp_path: Path, *flags: str) -> tuple[subprocess.CompletedProcess[str], dict]:
    env = {**clean_env(), "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'mlflow.db'}"}
    proc = subprocess.run([sys.executable, "-m", "distcomp", "run", str(JOBS / spec), "--run-dir",
                           str(tmp_path / "run"), "--grace", "1", "--experiment", "rc", *flags],
                          capture_output=True, text=True, timeout=180, env=env, cwd=tmp_path)
    status = json.loads((tmp_path / "run" / "status.json").read_text()) if (tmp_path / "run").exists() else {}
    return proc, status


def failure_tag(tmp_path: Path) -> str:
    from mlflow import MlflowClient

    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    (run,) = client.search_runs([client.get_experiment_by_name("rc").experiment_id])
    return str(run.data.tags["distcomp.failure"])


@pytest.mark.slow
def test_a_recorded_exception_is_the_root_cause(tmp_path: Path) -> None:
    proc, status = run("recorded.yaml", tmp_path, "--env", "MY_SETTING=from-cli")
    assert proc.returncode == 1, proc.stderr
    cause = status["root_cause"]
    assert cause["name"] == "rank1"
    assert "error file " in cause["detail"] and "rank1.attempt0.error.json" in cause["detail"]
    assert cause["detail"].endswith("ValueError: shard 3 of the training set is corrupt")
    assert "ValueError: shard 3 of the training set is corrupt" in proc.stderr
    assert "shard 3" in failure_tag(tmp_path)
    assert "[rank0]: rank 0 env from-cli" in proc.stdout  # --env reaches every rank, over the spec's


@pytest.mark.slow
def test_a_failed_mpi_rank_is_the_root_cause_with_its_own_lines(tmp_path: Path) -> None:
    """distcomp's rank watcher names the rank that failed, whoever ends first (it or mpirun)."""
    proc, status = run("mpi-silent.yaml", tmp_path)
    assert proc.returncode == 1, proc.stderr
    cause = status["root_cause"]
    assert (cause["name"], cause["returncode"], cause["tail"]) == ("rank0", 3, ["the shard is missing"]), cause
    assert "the shard is missing" in failure_tag(tmp_path)


@pytest.mark.slow
def test_a_silent_mpirun_shows_the_rank_logs_that_hold_the_error(tmp_path: Path) -> None:
    """Without the watcher (an exec agent of the user's own): mpirun's failure, its ranks' lines."""
    proc, status = run("mpi-silent.yaml", tmp_path, "--env", "PRTE_MCA_odls_base_exec_agent=env")
    assert proc.returncode == 1, proc.stderr
    assert "it printed nothing" not in proc.stderr
    assert f"last lines of its ranks' logs in {tmp_path / 'run' / 'logs'}:" in proc.stderr
    assert "[rank0] the shard is missing" in proc.stderr
    assert status["root_cause"]["tail"] == ["[rank0] the shard is missing"]
    assert "the shard is missing" in failure_tag(tmp_path)


def test_a_bad_env_flag_is_refused_before_anything_starts(tmp_path: Path) -> None:
    for bad, said in (("NOEQUALS", "expected NAME=VALUE"), ("1BAD=x", "not a variable name")):
        proc, _ = run("recorded.yaml", tmp_path, "--env", bad)
        assert proc.returncode == 2 and said in proc.stderr and "Traceback" not in proc.stderr
        assert not (tmp_path / "run").exists()
