"""Real MLflow stores for the tracking tests: a SQLite database MLflow created (one template
per session, copied per test: creating one costs seconds) and a real ``mlflow server`` on
127.0.0.1, started once per session and ended by its own pid."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Iterator

import pytest

from ..targets._jobs import clean_env
from ..targets.conftest import _kill_leftovers  # noqa: F401  (autouse here too: no rank outlives a test)


@pytest.fixture(scope="session")
def template_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An empty MLflow database, created by MLflow itself."""
    path = tmp_path_factory.mktemp("template") / "mlflow.db"
    code = "import sys, mlflow; mlflow.MlflowClient(sys.argv[1]).search_experiments()"
    subprocess.run([sys.executable, "-c", code, f"sqlite:///{path}"], check=True, capture_output=True, timeout=120)
    return path


@pytest.fixture
def sqlite_uri(template_db: Path, tmp_path: Path) -> str:
    db = tmp_path / "store" / "mlflow.db"
    db.parent.mkdir()
    shutil.copyfile(template_db, db)
    return f"sqlite:///{db}"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def mlflow_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``http://127.0.0.1:PORT`` of a real ``mlflow server`` that proxies its artifacts."""
    home = tmp_path_factory.mktemp("server")
    port = _free_port()
    log = open(home / "server.log", "wb")
    argv = [str(Path(sys.executable).parent / "mlflow"), "server", "--host", "127.0.0.1", "--port", str(port),
            "--backend-store-uri", f"sqlite:///{home / 'mlflow.db'}",
            "--artifacts-destination", str(home / "artifacts"), "--workers", "1"]
    proc = subprocess.Popen(argv, cwd=home, stdout=log, stderr=subprocess.STDOUT, env=clean_env(),
                            start_new_session=True)
    uri = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"{uri}/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"mlflow server did not start:\n{(home / 'server.log').read_text()[-3000:]}")
            time.sleep(0.3)
        yield uri
    finally:
        try:
            os.killpg(proc.pid, signal.SIGTERM)  # its own group: uvicorn and its workers
            proc.wait(15)
        except ProcessLookupError:
            pass
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()
