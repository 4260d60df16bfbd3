"""The MLflow target's tests share the tracking tests' stores: a SQLite database MLflow created
(copied per test) and a real ``mlflow server`` on 127.0.0.1."""

from tests.tracking.conftest import mlflow_server, sqlite_uri, template_db  # noqa: F401
