"""Real MLflow stores for every package's tests, as one pytest plugin (tests/conftest.py's
``pytest_plugins``): a SQLite database MLflow created (one template per session, copied per
test: creating one costs seconds) and a real ``mlflow server`` on 127.0.0.1, started once per
session and ended by its own pid. Defined once here, not imported into each package's conftest:
pytest keeps a session fixture per place it is defined, so each import made a template and a
server of its own (~5 s and ~9 s of CPU each, a dozen of them a worker)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest

from .tracking._server import Server


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


_SERVERS: dict[str, Server] = {}  # uri -> the session's server, for tests that look under the hood


@pytest.fixture(scope="session")
def mlflow_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``http://127.0.0.1:PORT`` of a real ``mlflow server`` that proxies its artifacts, for the
    whole session: every package's tests ask for it by name (never import it: that makes another)."""
    server = Server(tmp_path_factory.mktemp("server")).start()
    _SERVERS[server.uri] = server
    try:
        yield server.uri
    finally:
        server.stop()


@pytest.fixture(scope="session")
def server_process(mlflow_server: str) -> Server:
    """The session's server itself: its database and artifact folder."""
    return _SERVERS[mlflow_server]


@pytest.fixture
def own_server(tmp_path: Path) -> Iterator[Server]:
    """A real ``mlflow server`` of the test's own, which the test may stop and start again
    (same port, same database): an outage."""
    server = Server(tmp_path / "server").start()
    try:
        yield server
    finally:
        server.stop()
