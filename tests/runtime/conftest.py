"""Stores for the runtime's tests: every kind a rank writes (see _stores), each real."""

from __future__ import annotations

import pytest

from ..tracking._server import Server
from ._stores import KINDS, Store


@pytest.fixture(scope="module", params=KINDS)
def store(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Store:
    """One store of each kind per test module."""
    root = tmp_path_factory.mktemp(f"mlflow-{request.param}")
    if request.param == "server":
        server: Server = request.getfixturevalue("server_process")
        return Store("server", root, server.uri, server.home)
    return Store(request.param, root)


@pytest.fixture(scope="module")
def sqlite_store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    """For the tests where nothing is sent: the kind of store does not matter."""
    return Store("sqlite", tmp_path_factory.mktemp("mlflow"))
