"""The recipes run for real: a test SQLite MLflow store per test (made by MLflow once per
session, copied per test), and no rank outlives its test."""

from ..targets.conftest import _kill_leftovers  # noqa: F401  (autouse: whatever a failed test left running)
