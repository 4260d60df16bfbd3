"""One lifecycle for every target, the local one included: ``distcomp.run`` is
``submit(spec, "local").wait()``, so the core's job handle creates a local job's MLflow run and
ends it once (``distcomp.core.submission``), the local target neither starts nor ends one, a
background job's worker settles its run as it ends (nobody asks ``distcomp status``), and a job
refused before it exists has no run. Real jobs, a real SQLite store."""

from __future__ import annotations

import ast
import inspect
import json
import os
import time
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest
from mlflow import MlflowClient

import distcomp
import distcomp.tracking as tracking
from distcomp.core.target import TargetType
from distcomp.errors import UsageError

PLUGIN = Path(distcomp.__file__).resolve().parent
SPEC = """\
name: lifecycle
version: 1.0.0
type: DistributedComponent
launcher:
  type: torch.distributed
  process_count_per_node: 2
  additional_arguments: python -c "print('rank ran')"
"""


@pytest.fixture
def spec(tmp_path: Path, sqlite_uri: str, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "code" / "component.yaml"
    path.parent.mkdir()
    path.write_text(SPEC)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", sqlite_uri)
    monkeypatch.chdir(tmp_path)
    return path


def _counting(monkeypatch: pytest.MonkeyPatch, name: str) -> list[str]:
    """Every call of ``distcomp.tracking.NAME``, as the file of its caller."""
    callers: list[str] = []
    real = getattr(tracking, name)

    def counted(*args: Any, **kwargs: Any) -> Any:
        callers.append(inspect.stack()[1].filename)
        return real(*args, **kwargs)

    monkeypatch.setattr(tracking, name, counted)
    return callers


def test_the_core_creates_and_ends_a_local_runs_mlflow_run_once(spec: Path, sqlite_uri: str, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    started, ended = _counting(monkeypatch, "start_run"), _counting(monkeypatch, "end_run")
    lines: list[str] = []
    outcome = distcomp.run(str(spec), run_dir=tmp_path / "run", notify=lines.append)
    core = str(PLUGIN / "core" / "submission.py")
    assert outcome.succeeded and outcome.tracking is not None
    assert (started, ended) == ([core], [core])
    run = MlflowClient(sqlite_uri).get_run(outcome.tracking.run_id)
    assert run.info.status == "FINISHED"
    # the local target's end tags and its run folder, as before: the ranks reported into it
    tags = run.data.tags
    assert (tags["distcomp.attempts"], tags["distcomp.exit_code"], tags["distcomp.state"]) == ("1", "0", "succeeded")
    assert tags["distcomp.run_dir"] == str(tmp_path / "run") and tags["distcomp.job"] == f"local:{tmp_path / 'run'}"
    assert f"MLflow run {outcome.tracking.run_id}: FINISHED" in lines
    status = json.loads((tmp_path / "run" / "status.json").read_text())
    assert status["mlflow"]["run_id"] == outcome.tracking.run_id and status["tracking"]["run_id"] == run.info.run_id
    # asked again, the job's record says its run ended: nothing ends it twice
    again = distcomp.job(str(tmp_path / "run")).status()
    assert again.succeeded and ended == [core]


def test_nothing_under_the_local_target_starts_or_ends_a_run() -> None:
    """No module of the local target imports ``start_run``/``end_run`` or calls ``finish`` (``JobRun``'s)."""
    found = []
    for path in sorted((PLUGIN / "targets" / "local").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom):
                found += [f"{path.name}: imports {a.name}" for a in node.names if a.name in ("start_run", "end_run")]
            elif isinstance(node, ast.Attribute) and node.attr in ("start_run", "end_run", "finish"):
                found.append(f"{path.name}:{node.lineno}: .{node.attr}")
    assert found == []
    assert "tracks_itself" not in {f.name for f in fields(TargetType)}


def test_a_background_jobs_run_ends_without_anyone_asking(spec: Path, sqlite_uri: str, tmp_path: Path) -> None:
    handle = distcomp.submit(str(spec), "local", run_dir=str(tmp_path / "bg"))
    assert handle.record is not None
    run_id = json.loads((handle.record / "job.json").read_text())["run_id"]
    client = MlflowClient(sqlite_uri)
    deadline = time.monotonic() + 120
    while client.get_run(run_id).info.status == "RUNNING" and time.monotonic() < deadline:
        time.sleep(0.2)
    assert client.get_run(run_id).info.status == "FINISHED"
    # ended by the job's worker, under the core's record: not by this process, never asked for its status
    ended = json.loads((handle.record / "job.json").read_text())["ended"]
    assert ended["state"] == "succeeded" and ended["pid"] != os.getpid()
    tags = client.get_run(run_id).data.tags
    supervisor = json.loads((tmp_path / "bg" / "status.json").read_text())["supervisor"]["pid"]
    assert (tags["distcomp.attempts"], tags["distcomp.supervisor.pid"]) == ("1", str(supervisor))
    assert supervisor == ended["pid"]
    assert "MLflow run " + run_id + ": FINISHED" in (tmp_path / "bg" / "console.log").read_text()
    # status finds it ended: the record is left as the worker wrote it
    assert distcomp.job(str(handle)).status().succeeded
    assert json.loads((handle.record / "job.json").read_text())["ended"] == ended


def test_a_refused_local_job_has_no_mlflow_run(spec: Path, sqlite_uri: str, tmp_path: Path) -> None:
    from distcomp.targets.local import claim

    busy = tmp_path / "busy"
    with claim(busy, "another", 1.0, watchdog=False):
        with pytest.raises(UsageError, match="pick another --run-dir"):
            distcomp.run(str(spec), run_dir=busy)
        with pytest.raises(UsageError, match="pick another --run-dir"):
            distcomp.submit(str(spec), "local", run_dir=str(busy))
    client = MlflowClient(sqlite_uri)
    assert client.search_runs([e.experiment_id for e in client.search_experiments()]) == []
