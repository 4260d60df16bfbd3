"""``distcomp run`` with tracking on, against a real SQLite store and a real ``mlflow server``:
one MLflow run per job whatever the launcher, metrics from rank 0 only, the job's outcome as
the run's status, the rank logs as its artifacts."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from mlflow import MlflowClient

from ..targets._jobs import clean_env
from ._probe import PROBE, WAIT, artifacts, distcomp, explain, only_run
from ._server import free_port

@pytest.fixture(params=["sqlite", "server"])
def store(request: pytest.FixtureRequest) -> str:
    return request.getfixturevalue("sqlite_uri" if request.param == "sqlite" else "mlflow_server")


@pytest.mark.slow
def test_four_ranks_make_one_run_with_rank0_metrics(store: str, tmp_path: Path) -> None:
    experiment = f"probe-{tmp_path.name}"  # the server is shared by the session's tests
    proc = distcomp(tmp_path, store, "--experiment", experiment, api_key="abc123")
    assert proc.returncode == 0, explain(proc)
    run = only_run(store, experiment)
    assert run.info.status == "FINISHED"
    history = MlflowClient(store).get_metric_history(run.info.run_id, "rank")
    assert len(history) == 5 and {m.value for m in history} == {0.0}, "metrics from a rank other than 0"
    assert sorted(m.step for m in MlflowClient(store).get_metric_history(run.info.run_id, "loss")) == list(range(5))
    params, tags = run.data.params, run.data.tags
    assert params["logged_by"] == "0" and params["world"] == "4"
    assert params["mode"] == "ok" and params["api_key"] == "***", params
    assert tags["distcomp.component"] == "tracking-probe" and tags["distcomp.version"] == "1.2.0"
    assert tags["distcomp.launcher"] == "torch.distributed"
    assert tags["distcomp.world_size"] == "4" and tags["distcomp.nodes"] == "1"
    import hashlib
    assert tags["distcomp.spec_sha256"] == hashlib.sha256((PROBE / "torch.yaml").read_bytes()).hexdigest()
    assert tags["distcomp.state"] == "succeeded" and "distcomp.failure" not in tags
    everything = " ".join([*params.values(), *tags.values(), *params, *tags])
    assert "do-not-log-me" not in everything and "abc123" not in everything
    assert {f"logs/rank{r}.log" for r in range(4)} | {"status.json"} <= artifacts(store, run.info.run_id)
    assert f"MLflow run {run.info.run_id}: FINISHED" in proc.stderr
    record = json.loads((tmp_path / "run" / "status.json").read_text())["mlflow"]
    assert record == {"run_id": run.info.run_id, "experiment_id": run.info.experiment_id, "tracking_uri": store}


@pytest.mark.slow
def test_failed_rank_fails_the_run_with_its_root_cause(store: str, tmp_path: Path) -> None:
    experiment = f"probe-{tmp_path.name}"
    proc = distcomp(tmp_path, store, "--experiment", experiment, mode="fail", bad_rank=2)
    assert proc.returncode == 1, explain(proc)
    run = only_run(store, experiment)
    assert run.info.status == "FAILED"
    tags = run.data.tags
    assert tags["distcomp.failure.process"] == "rank2" and tags["distcomp.failure.exit_code"] == "3"
    assert "exited with code 3" in tags["distcomp.failure"] and "rank 2 fails on purpose" in tags["distcomp.failure"]
    # what rank 0 logged before the failure is kept
    assert len(MlflowClient(store).get_metric_history(run.info.run_id, "loss")) == 5
    assert {f"logs/rank{r}.log" for r in range(4)} <= artifacts(store, run.info.run_id)


@pytest.mark.slow
def test_ctrl_c_marks_the_run_killed(store: str, tmp_path: Path) -> None:
    experiment = f"probe-{tmp_path.name}"
    proc = distcomp(tmp_path, store, "--experiment", experiment, wait=False, mode="hang")
    assert isinstance(proc, subprocess.Popen)
    deadline = time.monotonic() + WAIT
    while len(list((tmp_path / "state").glob("rank*.ready"))) < 4:
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[1]
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    run = only_run(store, experiment)
    assert run.info.status == "KILLED" and run.data.tags["distcomp.state"] == "cancelled"
    assert len(MlflowClient(store).get_metric_history(run.info.run_id, "loss")) == 5
    assert {f"logs/rank{r}.log" for r in range(4)} <= artifacts(store, run.info.run_id)


@pytest.mark.slow
def test_mlflow_start_run_on_every_rank_resumes_the_job_run(store: str, tmp_path: Path) -> None:
    experiment = f"probe-{tmp_path.name}"
    proc = distcomp(tmp_path, store, "--experiment", experiment, mode="mlflow")
    assert proc.returncode == 0, explain(proc)
    run = only_run(store, experiment)
    assert run.info.status == "FINISHED"
    # rank 0 logs, as MLflow's convention under DDP has it; the other ranks' writes are dropped
    assert "seen_rank0" in run.data.metrics and not {f"seen_rank{r}" for r in (1, 2, 3)} & run.data.metrics.keys()
    assert {(tmp_path / "state" / f"rank{r}.ready").read_text() for r in range(4)} == {run.info.run_id}


def test_mpi_job_logs_from_rank0_only(sqlite_uri: str, tmp_path: Path) -> None:
    proc = distcomp(tmp_path, sqlite_uri, spec="mpi.yaml")
    assert proc.returncode == 0, explain(proc)
    run = only_run(sqlite_uri)
    assert run.data.tags["distcomp.launcher"] == "mpi" and run.data.params["world"] == "2"
    assert {m.value for m in MlflowClient(sqlite_uri).get_metric_history(run.info.run_id, "rank")} == {0.0}


@pytest.mark.slow
def test_default_store_is_sqlite_in_the_current_folder(tmp_path: Path) -> None:
    proc = distcomp(tmp_path, None)
    assert proc.returncode == 0, explain(proc)
    assert (tmp_path / "mlflow.db").is_file() and not (tmp_path / "mlruns" / "0" / "meta.yaml").exists()
    run = only_run(f"sqlite:///{tmp_path / 'mlflow.db'}")
    assert run.info.status == "FINISHED"


def test_no_tracking_makes_no_run_and_tells_the_ranks(tmp_path: Path) -> None:
    proc = distcomp(tmp_path, None, "--no-tracking")
    assert proc.returncode == 0, explain(proc)
    assert not (tmp_path / "mlflow.db").exists() and "MLflow" not in proc.stderr
    assert "no MLflow run" not in (tmp_path / "run" / "logs" / "rank0.log").read_text()


def test_unreachable_server_stops_before_any_rank(tmp_path: Path) -> None:
    # quickly: a server that never answered gets a few tries, not MLflow's four minutes of backoff
    proc = distcomp(tmp_path, f"http://127.0.0.1:{free_port()}", timeout=60)
    assert proc.returncode == 2
    assert "cannot reach the MLflow server" in proc.stderr and "--no-tracking" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "run").exists() and not list((tmp_path / "state").iterdir())


def test_resumes_the_run_named_by_mlflow_run_id(sqlite_uri: str, tmp_path: Path) -> None:
    client = MlflowClient(sqlite_uri)
    outer = client.create_run(client.create_experiment("outer"))
    state = tmp_path / "state"
    state.mkdir()
    argv = [sys.executable, "-m", "distcomp", "run", str(PROBE / "torch.yaml"), "--quiet",
            "--run-dir", str(tmp_path / "run"), "--input", f"state_dir={state}"]
    proc = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=WAIT,
                          env=clean_env(MLFLOW_TRACKING_URI=sqlite_uri, MLFLOW_RUN_ID=outer.info.run_id))
    assert proc.returncode == 0, explain(proc)
    assert client.get_experiment_by_name("tracking-probe") is None  # no run of its own
    run = client.get_run(outer.info.run_id)
    assert run.info.status == "FINISHED" and run.data.tags["distcomp.component"] == "tracking-probe"
    assert len(client.get_metric_history(outer.info.run_id, "loss")) == 5


@pytest.mark.slow
def test_system_metrics_per_node(sqlite_uri: str, tmp_path: Path) -> None:
    proc = distcomp(tmp_path, sqlite_uri, "--system-metrics", "--nodes", "2", "--nproc-per-node", "1", linger=6)
    assert proc.returncode == 0, explain(proc)
    metrics = only_run(sqlite_uri).data.metrics
    for node in ("node-0", "node-1"):  # simulated nodes (distcomp.tracking.nodes)
        assert any(k.startswith(f"system/{node}/cpu") for k in metrics), sorted(metrics)
        assert any(k.startswith(f"system/{node}/system_memory") for k in metrics), sorted(metrics)


def test_the_launcher_never_imports_mlflow_for_an_existing_database(sqlite_uri: str, tmp_path: Path) -> None:
    """Creating and ending the run costs the job no ``import mlflow`` (seconds of CPU)."""
    state = tmp_path / "state"
    state.mkdir()
    code = ("import sys; from distcomp.cli import main; "
            f"rc = main(['run', {str(PROBE / 'torch.yaml')!r}, '--quiet', '--run-dir', {str(tmp_path / 'run')!r}, "
            f"'--input', 'state_dir={state}']); "
            "heavy = sorted(m for m in ('mlflow', 'sqlalchemy', 'alembic') if m in sys.modules); "
            "print('heavy:', heavy); sys.exit(rc)")
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=WAIT,
                          env=clean_env(MLFLOW_TRACKING_URI=sqlite_uri))
    assert proc.returncode == 0, explain(proc)
    assert "heavy: []" in proc.stdout
    assert only_run(sqlite_uri).info.status == "FINISHED"
