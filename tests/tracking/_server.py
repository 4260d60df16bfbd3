"""A real ``mlflow server`` on 127.0.0.1 that a test can stop and start again on the same port
and the same database (an outage), always ended by its own pid: its process group."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from .._procs import stop_group
from ..targets._jobs import clean_env


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """``mlflow server`` with its SQLite database and proxied artifacts under ``home``."""

    def __init__(self, home: Path, port: int | None = None) -> None:
        self.home, self.port = home, port or free_port()
        self.uri = f"http://127.0.0.1:{self.port}"
        self.db = home / "mlflow.db"
        self.artifacts = home / "artifacts"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, wait: float = 120.0) -> "Server":
        self.home.mkdir(parents=True, exist_ok=True)
        argv = [str(Path(sys.executable).parent / "mlflow"), "server", "--host", "127.0.0.1", "--port", str(self.port),
                "--backend-store-uri", f"sqlite:///{self.db}", "--artifacts-destination", str(self.artifacts),
                "--workers", "1"]
        with open(self.home / "server.log", "ab") as log:  # the child keeps its own copy of the descriptor
            self.proc = subprocess.Popen(argv, cwd=self.home, stdout=log, stderr=subprocess.STDOUT,
                                         env=clean_env(MLFLOW_DISABLE_TELEMETRY="true",
                                                       # MLflow 3's job runner (GenAI scorer jobs) starts ~10
                                                       # huey consumers, each importing MLflow: ~20 s of CPU
                                                       # a server, for a feature no test uses
                                                       MLFLOW_SERVER_ENABLE_JOB_EXECUTION="false"),
                                         start_new_session=True)
        deadline = time.monotonic() + wait
        while not self.healthy():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"mlflow server did not start:\n{(self.home / 'server.log').read_text()[-3000:]}")
            time.sleep(0.3)
        return self

    def healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.uri}/health", timeout=2) as r:
                return r.status == 200
        except OSError:
            return False

    def stop(self) -> None:
        """SIGTERM to its group (uvicorn and its workers), SIGKILL if it lingers; the port is free after."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        stop_group(proc)
        while self.healthy():  # a worker that outlived its parent would still answer
            time.sleep(0.1)
