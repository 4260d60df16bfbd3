"""``mlflow run DIR -b distcomp``: the real ``mlflow`` command runs a compiled project as a 2-rank
job against a SQLite store, in the one run ``mlflow run`` created; the real
``mlflow.projects.run`` API cancels one."""

from __future__ import annotations

import json
import time
from pathlib import Path

import psutil
import pytest
from mlflow import MlflowClient

from distcomp.core.jobrecord import KEY, VERSION, read_record
from distcomp.targets.mlflow import compile_project

from .._jobs import wait_for
from ._helpers import PROBE, all_runs, artifact_text, explain, mlflow_run, only_run

TRICKY = "hello world; $(touch pwned) 'q'"  # reaches the ranks as one argument, through no shell


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return compile_project(PROBE, tmp_path / "project")


@pytest.mark.slow
def test_mlflow_run_cli_runs_two_ranks_in_one_run(project: Path, sqlite_uri: str, tmp_path: Path) -> None:
    proc = mlflow_run(project, sqlite_uri, tmp_path, "steps=3", f"tag={TRICKY}")
    assert proc.returncode == 0, explain(proc)
    run = only_run(sqlite_uri)  # mlflow's run is the job's: distcomp made none of its own
    client = MlflowClient(sqlite_uri)
    assert run.info.status == "FINISHED"
    assert client.get_experiment(run.info.experiment_id).name == "probe"
    tags = run.data.tags
    assert tags["mlflow.project.backend"] == "distcomp"
    assert tags["mlflow.source.type"] == "PROJECT" and tags["mlflow.source.name"] == str(project)
    assert tags["mlflow.project.entryPoint"] == "main"
    assert tags["distcomp.component"] == "mlflow-probe" and tags["distcomp.world_size"] == "2"
    assert tags["distcomp.state"] == "succeeded"
    # metrics from rank 0 only, one point per step; the all-reduce saw both ranks (1 + 2)
    ranks = client.get_metric_history(run.info.run_id, "rank")
    assert [(m.step, m.value) for m in ranks] == [(0, 0.0), (1, 0.0), (2, 0.0)]
    assert len(client.get_metric_history(run.info.run_id, "loss")) == 3
    assert run.data.metrics["allreduce"] == 3.0
    params = run.data.params
    assert params["steps"] == "3" and params["lr"] == "0.5"  # -P and a default, as MLflow logged them
    assert params["tag_seen"] == TRICKY and params["logged_by"] == "0"  # what rank 0 received and logged
    for rank in (0, 1):
        log = artifact_text(sqlite_uri, run.info.run_id, f"logs/rank{rank}.log", tmp_path / f"a{rank}")
        assert f"rank {rank}/2 got tag={TRICKY!r} steps=3 lr=0.5" in log
    assert not list(project.rglob("pwned")) and not (tmp_path / "pwned").exists()


@pytest.mark.slow
def test_a_failing_rank_fails_the_run(project: Path, sqlite_uri: str, tmp_path: Path) -> None:
    proc = mlflow_run(project, sqlite_uri, tmp_path, "tag=x", "fail_rank=1")
    assert proc.returncode != 0, explain(proc)
    assert "failed" in proc.stderr and "Traceback" not in proc.stderr
    run = only_run(sqlite_uri)
    assert run.info.status == "FAILED"
    assert "rank1" in run.data.tags["distcomp.failure"] and run.data.tags["distcomp.failure.exit_code"] == "3"
    assert run.data.tags["mlflow.project.backend"] == "distcomp"


@pytest.mark.slow
def test_a_bad_backend_config_is_refused_before_any_run(project: Path, sqlite_uri: str, tmp_path: Path) -> None:
    proc = mlflow_run(project, sqlite_uri, tmp_path, "tag=x", config='{"nproc_per_nodes": 2, "nodes": 0}')
    assert proc.returncode == 1, explain(proc)
    assert "unknown backend config key 'nproc_per_nodes' (did you mean 'nproc_per_node'?)" in proc.stderr
    assert "the distcomp backend knows: nproc_per_node, nodes, timeout, max_restarts, run_dir" in proc.stderr
    assert "backend config nodes: expected an integer >= 1, got 0" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert all_runs(sqlite_uri) == []  # nothing was created, so nothing is left RUNNING


def test_other_env_managers_and_unknown_params_are_refused(project: Path, sqlite_uri: str, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    import mlflow.projects
    from mlflow.exceptions import ExecutionException

    monkeypatch.setenv("MLFLOW_TRACKING_URI", sqlite_uri)
    with pytest.raises(ExecutionException, match="use --env-manager local"):
        mlflow.projects.run(str(project), backend="distcomp", parameters={"tag": "x"}, env_manager="virtualenv",
                            synchronous=False)
    with pytest.raises(ExecutionException, match=r"unknown parameter\(s\) epochs .*its parameters: steps, tag"):
        mlflow.projects.run(str(project), backend="distcomp", parameters={"tag": "x", "epochs": "2"},
                            env_manager="local", synchronous=False)
    assert all_runs(sqlite_uri) == []


def test_an_entry_point_that_is_not_distcomp_run_is_refused(tmp_path: Path, sqlite_uri: str,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    import mlflow.projects
    from mlflow.exceptions import ExecutionException

    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "MLproject").write_text("name: plain\nentry_points:\n  main:\n    command: python x.py\n")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", sqlite_uri)
    with pytest.raises(ExecutionException, match=r"`python -m distcomp.worker RECORD NAME=VALUE \.\.\.`.*distcomp "
                                                 r"compile --target mlflow"):
        mlflow.projects.run(str(tmp_path / "plain"), backend="distcomp", env_manager="local", synchronous=False)
    assert all_runs(sqlite_uri) == []


@pytest.mark.slow
def test_cancel_stops_every_rank_and_kills_the_run(project: Path, sqlite_uri: str, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    import mlflow.projects

    monkeypatch.setenv("MLFLOW_TRACKING_URI", sqlite_uri)
    pids = tmp_path / "pids"
    submitted = mlflow.projects.run(str(project), backend="distcomp", backend_config={"nproc_per_node": 2},
                                    parameters={"tag": "c", "sleep": "120", "pid_dir": str(pids)},
                                    env_manager="local", experiment_name="probe", synchronous=False)
    try:
        assert submitted.get_status() == "RUNNING"
        wait_for([pids / "rank0.pid", pids / "rank1.pid"], timeout=90)
        ranks = [int((pids / f"rank{r}.pid").read_text()) for r in (0, 1)]
        assert all(psutil.pid_exists(p) for p in ranks)
        assert submitted.get_status() == "RUNNING"
        assert MlflowClient(sqlite_uri).get_run(submitted.run_id).info.status == "RUNNING"
        t0 = time.monotonic()
        submitted.cancel()
        took = time.monotonic() - t0
    finally:
        if submitted.get_status() == "RUNNING":
            submitted.cancel()
    assert took < 20, f"cancel took {took:.1f} s"
    end = time.monotonic() + 5
    while any(_alive(p) for p in ranks + [submitted.pid]) and time.monotonic() < end:
        time.sleep(0.05)
    assert not any(_alive(p) for p in ranks + [submitted.pid]), "a rank or distcomp outlived cancel()"
    run = only_run(sqlite_uri)
    assert run.info.run_id == submitted.run_id and run.info.status == "KILLED"
    assert submitted.get_status() == "KILLED" and submitted.wait() is False


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@pytest.mark.slow
def test_the_local_backend_runs_the_same_project_in_one_run(sqlite_uri: str, tmp_path: Path) -> None:
    """Without -b: MLflow's own backend runs the command through bash, distcomp attaches to its run."""
    from ._helpers import distcomp

    made = distcomp("compile", "--target", "mlflow", str(PROBE), "--nproc-per-node", "2", "--out", "project",
                    cwd=tmp_path)
    assert made.returncode == 0, explain(made)
    proc = mlflow_run(tmp_path / "project", sqlite_uri, tmp_path, "steps=2", "tag=local", backend=None, config=None)
    assert proc.returncode == 0, explain(proc)
    run = only_run(sqlite_uri)
    assert run.info.status == "FINISHED"
    assert run.data.tags["mlflow.source.type"] == "PROJECT" and run.data.tags["distcomp.world_size"] == "2"
    assert run.data.params["tag_seen"] == "local"
    assert len(MlflowClient(sqlite_uri).get_metric_history(run.info.run_id, "rank")) == 2
    assert "python -m distcomp.worker distcomp-job.json steps={steps} " in (tmp_path / "project" / "MLproject").read_text()
    assert read_record(tmp_path / "project" / "distcomp-job.json").options == {"nproc_per_node": 2}


@pytest.mark.slow
def test_sigterm_to_mlflow_run_cancels_the_job(project: Path, sqlite_uri: str, tmp_path: Path) -> None:
    """A cancelled pipeline step SIGTERMs `mlflow run`: the job must not live on without it."""
    import signal
    import subprocess

    from ._helpers import MLFLOW, user_env

    pids = tmp_path / "pids"
    argv = [str(MLFLOW), "run", str(project), "-b", "distcomp", "-c", '{"nproc_per_node": 2}', "--env-manager",
            "local", "-P", "tag=t", "-P", "sleep=120", "-P", f"pid_dir={pids}"]
    proc = subprocess.Popen(argv, cwd=tmp_path, env=user_env(sqlite_uri), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        wait_for([pids / "rank0.pid", pids / "rank1.pid"], proc, timeout=90)
        ranks = [int((pids / f"rank{r}.pid").read_text()) for r in (0, 1)]
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=40)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode != 0, err
    assert not any(_alive(p) for p in ranks), "a rank outlived `mlflow run`"
    assert only_run(sqlite_uri).info.status == "KILLED"


# what `distcomp compile --target mlflow` wrote before projects carried a job record
OLDER_COMMAND = ("distcomp run component.yaml --nproc-per-node 2 --input steps={steps} --input tag={tag} "
                 "--input lr={lr} --input-if-set fail_rank={fail_rank} --input sleep={sleep} "
                 "--input-if-set pid_dir={pid_dir}")


@pytest.mark.slow
def test_a_project_of_the_older_form_is_refused_before_any_run(project: Path, sqlite_uri: str, tmp_path: Path) -> None:
    """An MLproject whose command is `distcomp run SPEC ...` is no longer read (issue 35): `mlflow
    run` says to recompile, and no run is left."""
    text = (project / "MLproject").read_text()
    command = next(line for line in text.splitlines() if "command:" in line).split("command: ", 1)[1]
    (project / "MLproject").write_text(text.replace(command, OLDER_COMMAND))
    (project / "distcomp-job.json").unlink()
    proc = mlflow_run(project, sqlite_uri, tmp_path, "steps=2", "tag=x", config=None)
    assert proc.returncode == 1, explain(proc)
    assert ("distcomp backend: the entry point's command is 'distcomp run component.yaml --nproc-per-node 2 "
            "--input steps={steps}") in proc.stderr
    assert "write such a project with `distcomp compile --target mlflow SPEC --out DIR`" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert all_runs(sqlite_uri) == []


@pytest.mark.slow
def test_a_project_record_of_a_newer_format_is_refused_before_any_run(project: Path, sqlite_uri: str,
                                                                     tmp_path: Path) -> None:
    """A project compiled by a newer distcomp: `mlflow run` says what to do, and no run is left."""
    record = project / "distcomp-job.json"
    data = json.loads(record.read_text())
    record.write_text(json.dumps({**data, KEY: VERSION + 1, "distcomp": "9.0.0"}))
    proc = mlflow_run(project, sqlite_uri, tmp_path, "tag=x")
    assert proc.returncode == 1, explain(proc)
    assert (f"distcomp backend: {record}: a job record of format {VERSION + 1}, written by distcomp 9.0.0, is newer "
            f"than this distcomp") in proc.stderr
    assert "upgrade distcomp where the job runs" in proc.stderr and "Traceback" not in proc.stderr
    assert all_runs(sqlite_uri) == []


@pytest.mark.slow
@pytest.mark.parametrize("where", ["parent", "elsewhere"])
def test_the_paths_mlflow_run_prints_work_from_where_the_user_stands(project: Path, sqlite_uri: str, tmp_path: Path,
                                                                    where: str) -> None:
    """The worker runs in the project's folder; the run folder, its logs and the outputs it prints
    are paths from the user's folder (relative under it, else absolute), not from the project's."""
    import re

    cwd = tmp_path if where == "parent" else tmp_path / "elsewhere"
    cwd.mkdir(exist_ok=True)
    proc = mlflow_run(project, sqlite_uri, cwd, "tag=x", config='{"nproc_per_node": 1}')
    assert proc.returncode == 0, explain(proc)
    found = re.search(r"run folder (\S+) \(logs in (\S+)\)", proc.stderr)
    outputs = re.search(r"outputs: out=(\S+)", proc.stderr)
    assert found and outputs, explain(proc)
    shown = [found[1], found[2], outputs[1]]
    for path in shown:
        assert (cwd / path).is_dir(), (path, explain(proc))
    if where == "parent":  # under the user's folder: relative, through the project's folder
        assert all(p.startswith("project/runs/") for p in shown), shown
    else:
        assert all(Path(p).is_absolute() for p in shown), shown
