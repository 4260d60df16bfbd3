"""The handle ``mlflow run -b distcomp`` gets back: one ``distcomp.worker`` process and its run.

The worker ends the MLflow run itself (FINISHED, FAILED, KILLED); this handle only ends it when
distcomp could not: it was SIGKILLed, or it stopped (bad -P value) before attaching. Once the
job has ended, it removes the folder of the worker's job record.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from pathlib import Path

from mlflow.entities import RunStatus
from mlflow.projects.submitted_run import SubmittedRun
from mlflow.tracking import MlflowClient

CANCEL_WAIT = 30.0  # seconds distcomp gets to stop its ranks (grace 5 s) and end the run


class DistcompSubmittedRun(SubmittedRun):
    def __init__(self, run_id: str, proc: subprocess.Popen[bytes], tracking_uri: str,
                 record_dir: Path | None = None) -> None:
        super().__init__()
        self._record_dir = record_dir
        self._run_id = run_id
        self._proc = proc
        self._uri = tracking_uri
        self._cancelled = False
        self._final: str | None = None

    @property
    def run_id(self) -> str:
        return self._run_id

    @property
    def pid(self) -> int:
        """The worker process (its ranks are its children)."""
        return self._proc.pid

    def wait(self) -> bool:
        """Block until the job ends; True iff every rank succeeded."""
        code = self._proc.wait()
        self._settle()
        return code == 0

    def get_status(self) -> str:
        if self._proc.poll() is None:
            return RunStatus.to_string(RunStatus.RUNNING)
        return self._settle()

    def cancel(self) -> None:
        """SIGTERM to distcomp, which stops every rank and marks the run KILLED; SIGKILL to all
        of them if it has not ended within CANCEL_WAIT seconds."""
        if self._proc.poll() is None:
            self._cancelled = True
            try:
                self._proc.send_signal(signal.SIGTERM)
                self._proc.wait(CANCEL_WAIT)
            except subprocess.TimeoutExpired:
                self._kill_all()
        self._settle()

    def _kill_all(self) -> None:
        """Last resort: distcomp, its ranks (their own process group) and whatever they started."""
        family = []
        try:
            import psutil

            family = psutil.Process(self._proc.pid).children(recursive=True)
        except Exception:  # psutil missing, or distcomp just ended: its own group still goes
            pass
        groups = {self._proc.pid}
        for p in family:
            try:
                groups.add(os.getpgid(p.pid))
            except OSError:
                pass
        groups.discard(os.getpgrp())  # never our own
        for group in groups:
            try:
                os.killpg(group, signal.SIGKILL)
            except OSError:
                pass
        for p in family:
            try:
                p.kill()
            except Exception:
                pass
        self._proc.wait()

    def _settle(self) -> str:
        """The run's final status; a run distcomp left RUNNING is ended here."""
        if self._final is not None:
            return self._final
        if self._record_dir is not None:
            shutil.rmtree(self._record_dir, ignore_errors=True)
        client = MlflowClient(self._uri)
        status = client.get_run(self._run_id).info.status
        if not RunStatus.is_terminated(RunStatus.from_string(status)):
            code = self._proc.returncode
            status = "FINISHED" if code == 0 else "KILLED" if self._cancelled else "FAILED"
            client.set_terminated(self._run_id, status)
        self._final = status
        return status
