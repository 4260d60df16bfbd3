"""Every node's system metrics in the job's one MLflow run (issue 37), on by default for a tracked
job: a local job's simulated nodes (``node-N``) and its one real node (this host's name), and the
node agent's sampler (``distcomp.agent.sysmetrics``), which Slurm, Ray and Kubeflow run: a real
agent, a real monitor, a real SQLite store."""

from __future__ import annotations

import json
import shutil
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil
import pytest
from mlflow import MlflowClient

from distcomp.agent.record import COMMAND, check
from distcomp.agent.sysmetrics import NODE_ENV, entry, node_env
from distcomp.tracking.nodes import host_node_id

from ..targets._jobs import clean_env
from ._probe import distcomp, explain, only_run

MONITOR = "distcomp.tracking.monitor"


def _system(run: Any) -> dict[str, set[str]]:
    """The run's system metrics by node: node -> metric names."""
    nodes: dict[str, set[str]] = {}
    for key in run.data.metrics:
        if key.startswith("system/"):
            node, _, name = key.removeprefix("system/").partition("/")
            nodes.setdefault(node, set()).add(name)
    return nodes


@pytest.mark.slow
def test_two_simulated_nodes_sample_into_the_one_run_at_the_interval(sqlite_uri: str, tmp_path: Path) -> None:
    """On by default; each simulated node is ``node-N``, sampled every --system-metrics-interval s."""
    proc = distcomp(tmp_path, sqlite_uri, "--nodes", "2", "--nproc-per-node", "1", "--system-metrics-interval", "1",
                    linger=10)
    assert proc.returncode == 0, explain(proc)
    run = only_run(sqlite_uri)
    nodes = _system(run)
    assert sorted(nodes) == ["node-0", "node-1"], sorted(run.data.metrics)
    for node, names in nodes.items():
        assert {"cpu_utilization_percentage", "system_memory_usage_megabytes", "disk_usage_percentage",
                "network_receive_megabytes"} <= names, (node, names)
        history = MlflowClient(sqlite_uri).get_metric_history(run.info.run_id, f"system/{node}/cpu_utilization_percentage")
        assert len(history) >= 3, (node, len(history), (tmp_path / "run" / "logs" / f"monitor-{node}.log").read_text())
        stamps = sorted(m.timestamp for m in history)
        gap = statistics.median(b - a for a, b in zip(stamps, stamps[1:])) / 1000
        assert 0.5 <= gap <= 3.0, f"{node}: samples {gap:.2f} s apart, asked for 1 s"
    # rank 0's own metrics are unchanged, and no unnamed system series
    assert len(MlflowClient(sqlite_uri).get_metric_history(run.info.run_id, "loss")) == 5
    assert not any(k.startswith("system/") and k.count("/") < 2 for k in run.data.metrics)


@pytest.mark.slow
def test_a_one_node_job_is_named_by_its_host(sqlite_uri: str, tmp_path: Path) -> None:
    proc = distcomp(tmp_path, sqlite_uri, "--nodes", "1", "--nproc-per-node", "2", "--system-metrics-interval", "1",
                    linger=6)
    assert proc.returncode == 0, explain(proc)
    nodes = _system(only_run(sqlite_uri))
    assert sorted(nodes) == [host_node_id()] and "cpu_utilization_percentage" in nodes[host_node_id()], nodes


@pytest.mark.slow
def test_no_system_metrics_samples_nothing(sqlite_uri: str, tmp_path: Path) -> None:
    proc = distcomp(tmp_path, sqlite_uri, "--nodes", "2", "--nproc-per-node", "1", "--no-system-metrics", linger=3)
    assert proc.returncode == 0, explain(proc)
    assert _system(only_run(sqlite_uri)) == {}
    assert not list((tmp_path / "run" / "logs").glob("monitor-*.log"))


@pytest.mark.slow
def test_an_untracked_job_starts_no_monitor(tmp_path: Path) -> None:
    proc = distcomp(tmp_path, None, "--nodes", "2", "--nproc-per-node", "1", "--no-tracking", linger=1)
    assert proc.returncode == 0, explain(proc)
    assert not list((tmp_path / "run" / "logs").glob("monitor-*.log"))
    assert not (tmp_path / "mlflow.db").exists()


# -- the node agent's sampler ---------------------------------------------------------------------


REPLICA = "import sys, time; print('rank up', flush=True); time.sleep(float(sys.argv[1])); print('rank done')"


def _record(folder: Path, env: dict[str, str], seconds: float, interval: float | None = 1.0) -> Path:
    """A one-node record whose one replica sleeps ``seconds``; ``env``: the ranks' (the run's)."""
    record = check({"distcomp_node_record": 1, "job": "sysmetrics", "nodes": 1, "cwd": ".",
                    "command": [sys.executable, "-c", REPLICA, str(seconds)], "env": env,
                    "replicas": [{"name": "rank0", "role": "worker", "index": 0, "node": 0, "rank": 0, "ranks": 1,
                                  "argv": [COMMAND]}],
                    "node_name_env": ["DISTCOMP_TEST_NODE"], "grace": 2.0, **entry(interval)}, "test")
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "node.json"
    path.write_text(json.dumps(record))
    path.chmod(0o600)
    return path


def _run(sqlite_uri: str) -> str:
    client = MlflowClient(sqlite_uri)
    experiment = client.create_experiment("agent-sysmetrics")
    return client.create_run(experiment).info.run_id


def _monitors(folder: Path) -> list[psutil.Process]:
    found = []
    for p in psutil.process_iter(["cmdline", "environ"]):
        try:
            if MONITOR in (p.info["cmdline"] or []) and str(folder) in " ".join((p.info["environ"] or {}).values()):
                found.append(p)
        except psutil.Error:
            continue
    return found


def _agent(path: Path, python: str = sys.executable, **env: str) -> subprocess.Popen[str]:
    return subprocess.Popen([python, "-m", "distcomp.agent", str(path)], cwd=path.parent, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=clean_env(DISTCOMP_TEST_NODE="alpha.example", **env))


@pytest.mark.slow
def test_the_agent_samples_its_node_into_the_run_and_stops_its_monitor(sqlite_uri: str, tmp_path: Path) -> None:
    run_id = _run(sqlite_uri)
    path = _record(tmp_path / "job", {"MLFLOW_RUN_ID": run_id, "MLFLOW_TRACKING_URI": sqlite_uri,
                                      "DISTCOMP_MLFLOW_RUN_ID": run_id, "JOB_MARK": str(tmp_path)}, seconds=8)
    agent = _agent(path)
    deadline = time.monotonic() + 30
    while not (found := _monitors(tmp_path)) and agent.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert len(found) == 1, "the agent started no monitor (or several)"
    monitor = found[0]
    argv = monitor.cmdline()
    assert argv[argv.index("--node-id") + 1] == "alpha.example" and argv[argv.index("--interval") + 1] == "1.0"
    assert monitor.ppid() == agent.pid and "DISTCOMP_MLFLOW_RUN_ID" not in monitor.environ()  # no rank's hook
    out, err = agent.communicate(timeout=60)
    assert agent.returncode == 0, err
    assert not psutil.pid_exists(monitor.pid) or monitor.status() == psutil.STATUS_ZOMBIE, "the monitor outlived its agent"
    metrics = MlflowClient(sqlite_uri).get_run(run_id).data.metrics
    assert "system/alpha.example/cpu_utilization_percentage" in metrics, sorted(metrics)
    history = MlflowClient(sqlite_uri).get_metric_history(run_id, "system/alpha.example/cpu_utilization_percentage")
    assert len(history) >= 2, (tmp_path / "job" / "monitors" / "alpha.example.log").read_text()
    assert "got SIGTERM; stopped" in (tmp_path / "job" / "monitors" / "alpha.example.log").read_text()
    assert "system metrics" not in err  # nothing went wrong: nothing said


@pytest.mark.slow
def test_a_stopped_agent_leaves_no_monitor(sqlite_uri: str, tmp_path: Path) -> None:
    run_id = _run(sqlite_uri)
    path = _record(tmp_path / "job", {"MLFLOW_RUN_ID": run_id, "MLFLOW_TRACKING_URI": sqlite_uri,
                                      "JOB_MARK": str(tmp_path)}, seconds=120)
    agent = _agent(path)
    deadline = time.monotonic() + 30
    while not (found := _monitors(tmp_path)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert found, "no monitor"
    time.sleep(2)
    agent.send_signal(signal.SIGTERM)
    agent.communicate(timeout=30)
    assert not psutil.pid_exists(found[0].pid) or found[0].status() == psutil.STATUS_ZOMBIE


@pytest.mark.slow
def test_an_agent_killed_outright_leaves_no_monitor(sqlite_uri: str, tmp_path: Path) -> None:
    """SIGKILL gives the agent no say: the monitor sees its parent gone and stops by itself."""
    run_id = _run(sqlite_uri)
    path = _record(tmp_path / "job", {"MLFLOW_RUN_ID": run_id, "MLFLOW_TRACKING_URI": sqlite_uri,
                                      "JOB_MARK": str(tmp_path)}, seconds=120)
    agent = _agent(path)
    deadline = time.monotonic() + 30
    while not (found := _monitors(tmp_path)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert found, "no monitor"
    agent.kill()
    agent.communicate(timeout=30)
    gone, _alive = psutil.wait_procs(found, timeout=20)
    assert gone, "the monitor outlived a SIGKILLed agent"


@pytest.mark.slow
def test_without_distcomp_in_the_image_the_agent_says_so_once_and_runs_the_job(sqlite_uri: str, tmp_path: Path) -> None:
    """As in a Kubeflow pod whose image has Python only: the agent's own files, carried, and a
    Python without distcomp or MLflow."""
    python = shutil.which("python3", path="/usr/bin:/usr/local/bin")
    assert python, "this test needs a system Python 3 besides the venv's"
    assert subprocess.run([python, "-c", "import mlflow"], capture_output=True).returncode != 0, \
        f"{python} has mlflow: the test needs a Python without it"
    carried = tmp_path / "carried"
    shutil.copytree(Path(__file__).resolve().parents[2] / "plugin" / "distcomp" / "agent", carried / "distcomp" / "agent",
                    ignore=shutil.ignore_patterns("__pycache__"))
    (carried / "distcomp" / "__init__.py").write_text("")
    run_id = _run(sqlite_uri)
    path = _record(tmp_path / "job", {"MLFLOW_RUN_ID": run_id, "MLFLOW_TRACKING_URI": sqlite_uri}, seconds=3)
    agent = _agent(path, python, PYTHONPATH=str(carried))
    out, err = agent.communicate(timeout=60)
    assert agent.returncode == 0, err
    assert "rank done" in (tmp_path / "job" / "logs" / "rank0.log").read_text()
    said = [line for line in err.splitlines() if "system metrics" in line]
    assert len(said) == 1, err
    assert "alpha.example" in said[0] and "No module named" in said[0] and "the job runs on" in said[0], said


def test_an_untracked_record_or_one_without_the_entry_starts_nothing(tmp_path: Path) -> None:
    for name, env, interval in (("untracked", {}, 1.0), ("off", {"MLFLOW_RUN_ID": "0" * 32}, None),
                                ("tracking-off", {"MLFLOW_RUN_ID": "0" * 32, "DISTCOMP_TRACKING": "off"}, 1.0)):
        path = _record(tmp_path / name, env, seconds=0, interval=interval)
        agent = _agent(path)
        _out, err = agent.communicate(timeout=60)
        assert agent.returncode == 0, err
        assert not (tmp_path / name / "monitors").exists(), name
        assert "system metrics" not in err


def test_nodes_that_share_an_address_get_a_name_each() -> None:
    assert [node_env(["10.0.0.1", "10.0.0.2"], i)[NODE_ENV] for i in range(2)] == ["10.0.0.1", "10.0.0.2"]
    assert [node_env(["127.0.0.1", "127.0.0.1"], i)[NODE_ENV] for i in range(2)] == ["127.0.0.1-node0",
                                                                                     "127.0.0.1-node1"]
    assert node_env(["host name/x"], 0) == {NODE_ENV: "host-name-x"}
    assert entry(None) == {} and entry(10) == {"system_metrics": {"interval": 10.0}}


@pytest.mark.slow
def test_a_node_without_a_replica_samples_until_the_job_s_replicas_end(sqlite_uri: str, tmp_path: Path) -> None:
    """mpirun's other nodes: their agent has no replica; where exits/ is shared (Slurm's record
    says so) it samples its node until every replica has reported its end."""
    run_id = _run(sqlite_uri)
    folder = tmp_path / "job"
    path = _record(folder, {"MLFLOW_RUN_ID": run_id, "MLFLOW_TRACKING_URI": sqlite_uri, "JOB_MARK": str(tmp_path)},
                   seconds=0)
    record = json.loads(path.read_text())
    record.update(nodes=2, node_env=["DISTCOMP_TEST_NODE_INDEX"], **entry(1.0, shared=True))
    path.write_text(json.dumps(check(record, "test")))
    agent = _agent(path, DISTCOMP_TEST_NODE_INDEX="1")
    time.sleep(3)
    assert agent.poll() is None, agent.communicate()
    assert len(_monitors(tmp_path)) == 1
    (folder / "exits").mkdir()
    (folder / "exits" / "rank0.json").write_text("{}")  # node 0's agent: its replica ended
    _out, err = agent.communicate(timeout=30)
    assert agent.returncode == 0, err
    assert not _monitors(tmp_path)
    history = MlflowClient(sqlite_uri).get_metric_history(run_id, "system/alpha.example/cpu_utilization_percentage")
    assert len(history) >= 2, len(history)
    # without the shared flag (Kubeflow, Ray: no exits/ seen across nodes), such a node just leaves
    record.update(entry(1.0))
    path.write_text(json.dumps(record))
    log = folder / "monitors" / "alpha.example.log"
    size = log.stat().st_size
    quick = _agent(path, DISTCOMP_TEST_NODE_INDEX="1")
    assert quick.wait(timeout=30) == 0
    assert log.stat().st_size == size, "a monitor started"
