"""Per-node system metrics: real MLflow (SQLite store), real monitor processes, no mocks."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import mlflow
import psutil
import pytest

from distcomp.tracking._monitors import Monitors, start_monitors

READY_TIMEOUT = 60.0  # a monitor starts in a tenth of a second; a loaded 2-core machine is slow
CPU, MEMORY = "cpu_utilization_percentage", "system_memory_usage_megabytes"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """One SQLite store and experiment per module: creating the schema takes seconds."""
    uri = f"sqlite:///{tmp_path_factory.mktemp('mlflow') / 'mlflow.db'}"
    return uri, mlflow.MlflowClient(uri).create_experiment("system-metrics")


@pytest.fixture
def run_id(store: tuple[str, str]) -> str:
    uri, experiment_id = store
    return mlflow.MlflowClient(uri).create_run(experiment_id).info.run_id


@pytest.fixture
def started(tmp_path: Path):
    """Yields a list to put Monitors in; whatever a failing test leaves running is stopped."""
    monitors: list[Monitors] = []
    yield monitors
    for m in monitors:
        m.stop(timeout=2.0)


def points(uri: str, run_id: str, key: str) -> int:
    return len(mlflow.MlflowClient(uri).get_metric_history(run_id, key))


def wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(0.1)


def ready(log: Path) -> bool:
    return log.exists() and "ready" in log.read_text(errors="replace").splitlines()


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


@pytest.mark.slow
def test_two_nodes_log_cpu_and_memory_under_their_own_names(store, run_id, started, tmp_path, monkeypatch):
    uri, _ = store
    # MLflow lets this variable beat the node id it is given; a launcher's own must not leak in.
    monkeypatch.setenv("MLFLOW_SYSTEM_METRICS_NODE_ID", "inherited")
    monitors = start_monitors(run_id, uri, ["node0", "node1"], tmp_path / "logs", interval=0.5)
    started.append(monitors)
    for p in monitors.processes:
        assert p.log_path == tmp_path / "logs" / f"monitor-{p.node_id}.log"
        wait_for(lambda log=p.log_path: ready(log), READY_TIMEOUT, f"{p.node_id} to print ready")
    time.sleep(1.5)  # three intervals after both are sampling

    assert monitors.stop() == []
    for p in monitors.processes:
        assert p.popen.returncode == 0
        assert gone(p.pid)
        for metric in (CPU, MEMORY, "system_memory_usage_percentage"):
            # at least two: sampled periodically while running, not just once when stopped
            assert points(uri, run_id, f"system/{p.node_id}/{metric}") >= 2, (metric, p.log_path.read_text())
    keys = mlflow.MlflowClient(uri).get_run(run_id).data.metrics
    assert {k.split("/")[1] for k in keys} == {"node0", "node1"}  # every metric carries its node id


@pytest.mark.slow
def test_stop_right_after_start_still_logs_one_point(store, run_id, started, tmp_path):
    # A job that fails at once: stop() lands while the monitor is still starting up, long before
    # its first 60 s interval ends. It must stop cleanly and still log a point.
    uri, _ = store
    monitors = start_monitors(run_id, uri, ["node0"], tmp_path, interval=60.0)
    started.append(monitors)

    assert monitors.stop(timeout=READY_TIMEOUT) == []
    (p,) = monitors.processes
    assert p.popen.returncode == 0, p.log_path.read_text()
    assert points(uri, run_id, f"system/node0/{CPU}") == 1
    assert points(uri, run_id, f"system/node0/{MEMORY}") == 1


@pytest.mark.slow
def test_monitor_stops_by_itself_when_its_launcher_is_killed(store, run_id, tmp_path):
    uri, _ = store
    launcher = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(f"""
            import time
            from pathlib import Path
            from distcomp.tracking._monitors import start_monitors
            m = start_monitors({run_id!r}, {uri!r}, ["node0"], Path({str(tmp_path)!r}), interval=0.5)
            print(m.processes[0].pid, flush=True)
            time.sleep(600)
        """)],
        stdout=subprocess.PIPE, text=True)
    try:
        pid = int(launcher.stdout.readline())
        wait_for(lambda: ready(tmp_path / "monitor-node0.log"), READY_TIMEOUT, "the monitor to print ready")
        assert not gone(pid)
    finally:
        launcher.send_signal(signal.SIGKILL)  # no chance to stop its monitor
        launcher.wait()
        launcher.stdout.close()
    try:
        wait_for(lambda: gone(pid), 10.0, f"orphaned monitor {pid} to exit")
    finally:
        if not gone(pid):
            os.kill(pid, signal.SIGKILL)
    log = (tmp_path / "monitor-node0.log").read_text()
    assert "parent process is gone" in log
    assert points(uri, run_id, f"system/node0/{CPU}") >= 1  # it logged what it had before leaving


@pytest.mark.slow
def test_a_run_ended_before_its_monitors_still_gets_their_last_sample(store, run_id, started, tmp_path):
    # A launcher that ends the run before stopping its monitors: not an error, nothing lost.
    uri, _ = store
    monitors = start_monitors(run_id, uri, ["node0"], tmp_path, interval=30.0)
    started.append(monitors)
    (p,) = monitors.processes
    wait_for(lambda: ready(p.log_path), READY_TIMEOUT, "the monitor to print ready")

    mlflow.MlflowClient(uri).set_terminated(run_id)
    assert monitors.stop() == []
    assert p.popen.returncode == 0
    assert "got SIGTERM; stopped after 1 samples" in p.log_path.read_text()
    assert points(uri, run_id, f"system/node0/{CPU}") == 1


def test_missing_run_id_is_one_line_and_exit_2(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_RUN_ID"}
    done = subprocess.run([sys.executable, "-m", "distcomp.tracking.monitor", "--node-id", "node0"],
                          env=env, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2
    assert done.stdout == ""  # never "ready"
    assert done.stderr.strip().splitlines() == [
        "distcomp monitor node0: MLFLOW_RUN_ID is not set: the launcher sets it to the job's MLflow run"]


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
@pytest.mark.parametrize("where", ["sqlite", "http"])
def test_unknown_run_or_unreachable_store_is_reported_by_stop(where, store, started, tmp_path):
    # http: nothing listens there. MLflow's own retries would take minutes to give up; 30 s is plenty.
    uri = store[0] if where == "sqlite" else f"http://127.0.0.1:{closed_port()}"
    monitors = start_monitors("0" * 32, uri, ["node1"], tmp_path, interval=0.5)
    started.append(monitors)
    (p,) = monitors.processes
    p.popen.wait(30.0)

    (problem,) = monitors.stop()
    assert problem.startswith(f"monitor node1 exited with code 2: distcomp monitor node1: cannot read run {'0' * 32}")
    assert "Traceback" not in p.log_path.read_text()
    assert "ready" not in p.log_path.read_text().splitlines()


@pytest.mark.slow
def test_straggler_is_killed_and_reported(store, run_id, started, tmp_path):
    # timeout=0: still importing mlflow when its time is up, so it must be SIGKILLed.
    uri, _ = store
    monitors = start_monitors(run_id, uri, ["node0"], tmp_path)
    started.append(monitors)
    (p,) = monitors.processes

    (problem,) = monitors.stop(timeout=0.0)
    assert problem.startswith("monitor node0 did not stop within 0s and was killed")
    assert p.popen.returncode == -signal.SIGKILL
    assert gone(p.pid)


@pytest.mark.parametrize("node_ids", [["node0", "node0"], ["a/b"], [""], ["node 0"]])
def test_bad_node_ids_start_nothing(node_ids, tmp_path):
    with pytest.raises(ValueError, match="node id"):
        start_monitors("r" * 32, "sqlite:///unused.db", node_ids, tmp_path / "logs")
    assert not (tmp_path / "logs").exists()
