"""The ``distcomp`` MLflow project backend: ``mlflow run DIR -b distcomp`` runs the entry point
``python -m distcomp.worker distcomp-job.json NAME=VALUE ...`` as a distributed job, tracked in
the run ``mlflow run`` created.

As MLflow's local backend does, it fetches the project, creates the run with MLflow's own tags
and params, and starts the entry point in the project's folder with ``MLFLOW_RUN_ID`` set; the
job attaches to that run (one run per job, rank 0 logs into it) and ends it. Unlike it, no
shell and no flags: the project's job record, the parameters' values and the backend config
become one job record (``_config.entry_record``; a record of a newer format is refused before
the run exists), which this interpreter's ``python -m distcomp.worker`` runs. With ``"target":
NAME`` in the backend config (any target that submits: ``"slurm"``, ``"ray"``, a third party's)
it is a ``submit`` record: the job goes to that target through the core (``distcomp.submit``),
which resumes the same run (``MLFLOW_RUN_ID``), hands it to every rank and ends it with the
job's state; waiting and cancelling (SIGTERM to it) are the same.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any, Mapping

from mlflow.exceptions import ExecutionException
from mlflow.projects.backend.abstract_backend import AbstractBackend
from mlflow.projects.utils import fetch_and_validate_project, get_entry_point_command, get_or_create_run, load_project
from mlflow.tracking import MlflowClient
from mlflow.utils.mlflow_tags import MLFLOW_PROJECT_BACKEND

from ...base.files import USER_CWD
from ...errors import UsageError
from ...core.jobrecord import write_record
from ...mlstore import TrackingError, resolve_uri
from ._config import check_entry_command, entry_record, parse_config
from ._errors import MlflowTargetError
from ._submitted import DistcompSubmittedRun

BACKEND = "distcomp"


class DistcompBackend(AbstractBackend):
    def run(self, project_uri: str, entry_point: str, params: Mapping[str, Any] | None, version: str | None,
            backend_config: Mapping[str, Any] | None, tracking_uri: str, experiment_id: str) -> DistcompSubmittedRun:
        params = dict(params or {})
        cwd = Path.cwd()
        try:  # everything a user can get wrong is checked before the run exists
            settings = parse_config(backend_config, cwd)
            uri = resolve_uri({"MLFLOW_TRACKING_URI": tracking_uri}, cwd)
        except (UsageError, TrackingError) as exc:  # a plugin that cannot load, too (the targets are asked)
            raise ExecutionException("distcomp backend: " + str(exc).replace("\n", "\n  ")) from None
        work_dir = fetch_and_validate_project(project_uri, version, entry_point, params)
        project = load_project(work_dir)
        _check_project(project, entry_point, params)
        command = get_entry_point_command(project, entry_point, params, settings.storage_dir)[0]
        try:  # the project's record read (a newer format refused) before the run exists
            record = entry_record(command, settings, work_dir)
        except UsageError as exc:
            raise ExecutionException(f"distcomp backend: {exc}") from None
        run = get_or_create_run(None, project_uri, experiment_id, work_dir, version, entry_point, params)
        run_id = run.info.run_id
        client = MlflowClient(tracking_uri)
        folder = tempfile.mkdtemp(prefix="distcomp-mlflow-")  # the job's record holds input values: 600
        try:
            client.set_tag(run_id, MLFLOW_PROJECT_BACKEND, BACKEND)  # MLflow sets it only after run() returns
            job = write_record(Path(folder) / "job.json", record)
            env = {**os.environ, "MLFLOW_RUN_ID": run_id, "MLFLOW_TRACKING_URI": uri,
                   "MLFLOW_EXPERIMENT_ID": str(run.info.experiment_id),
                   USER_CWD: str(cwd)}  # the worker runs in the project: it prints paths usable from here
            # its own session: a Ctrl-C meant for `mlflow run` reaches distcomp as cancel()'s SIGTERM
            proc = subprocess.Popen([sys.executable, "-m", "distcomp.worker", str(job)], cwd=work_dir, env=env,
                                    stdin=subprocess.DEVNULL, start_new_session=True)
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            client.set_terminated(run_id, "FAILED")
            raise
        submitted = DistcompSubmittedRun(run_id, proc, uri, Path(folder))
        if not settings.synchronous and _inside_mlflow_run_cli():
            _wait_here(submitted)
        return submitted


def _check_project(project: Any, entry_point: str, params: Mapping[str, Any]) -> None:
    if project.docker_env:
        raise ExecutionException("distcomp backend: this project runs in Docker (docker_env); distcomp runs the "
                                 "ranks on this machine")
    entry = project.get_entry_point(entry_point)
    if entry is None:
        raise ExecutionException(f"distcomp backend: no entry point {entry_point!r}")
    try:
        check_entry_command(entry.command)
    except MlflowTargetError as exc:
        raise ExecutionException(f"distcomp backend: {exc}") from None
    extra = sorted(set(params) - set(entry.parameters))
    if extra:  # MLflow would append them as `--NAME VALUE`, which the worker does not take
        known = ", ".join(entry.parameters) or "none"
        raise ExecutionException(f"distcomp backend: unknown parameter(s) {', '.join(extra)} for entry point "
                                 f"{entry_point!r} (its parameters: {known})")


def _inside_mlflow_run_cli() -> bool:
    """True inside the ``mlflow run`` command. It passes synchronous=False to every plugin
    backend and exits as soon as run() returns, with status 0: the job is waited on here, so
    that its exit status tells the job's outcome."""
    cli = sys.modules.get("mlflow.cli")
    if cli is None:
        return False
    import click

    ctx = click.get_current_context(silent=True)
    return ctx is not None and ctx.command is getattr(cli, "run", None)


def _wait_here(submitted: DistcompSubmittedRun) -> None:
    """Wait for the job; Ctrl-C or SIGTERM to ``mlflow run`` (a cancelled pipeline step) cancels it."""
    def stop(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, stop) if main else None
    try:
        ok = submitted.wait()
    except KeyboardInterrupt:
        if main:  # a second signal must not cut the cancelling short
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        submitted.cancel()
        raise
    finally:
        if main:
            signal.signal(signal.SIGTERM, previous)
    if not ok:  # `mlflow run` reports an ExecutionException and exits 1
        raise ExecutionException(f"Run (ID '{submitted.run_id}') failed")


__all__ = ["BACKEND", "DistcompBackend"]
