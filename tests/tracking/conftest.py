"""The tracking tests: their real MLflow stores (a template database MLflow made, copied per
test; a real ``mlflow server``) are every package's, in tests/_mlflow_fixtures.py."""

from __future__ import annotations

from ..targets.conftest import _kill_leftovers  # noqa: F401  (autouse here too: no rank outlives a test)
