"""What the launcher needs from an MLflow store, and which implementation serves a URI.

Creating the run must not cost the ranks the ~1.5-2.5 s of ``import mlflow``, so the two
common stores are written directly: a SQLite database (MLflow's schema, checked first) and
an MLflow server (its REST API, over urllib). Anything else goes through MLflow itself.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping, Protocol, Sequence
from urllib.parse import urlsplit

from ._records import Metric, RunData, RunRef, TrackingError

__all__ = ["Store", "open_store"]


class Store(Protocol):
    uri: str

    def experiment(self, name: str) -> str:
        """The id of the active experiment ``name``, created when missing."""

    def create_run(self, experiment_id: str, name: str, tags: Mapping[str, str],
                   params: Mapping[str, str]) -> RunRef: ...

    def get_run(self, run_id: str) -> RunRef: ...

    def run_data(self, run_id: str) -> RunData:
        """The run's tags and params as they are now."""

    def log(self, run_id: str, tags: Mapping[str, str], params: Mapping[str, str] = {},
            metrics: Sequence[Metric] = ()) -> list[str]:
        """Set tags, add params and metric points; returns problems (a param that already has
        another value: kept, as MLflow keeps it)."""

    def upload(self, run: RunRef, files: Sequence[tuple[Path, str]]) -> None:
        """Copy each local file to its artifact path (``logs/rank0.log``) in the run."""

    def terminate(self, run_id: str, status: str) -> None: ...


def open_store(uri: str, env: Mapping[str, str] | None = None) -> Store:
    """The fastest store that can write ``uri`` faithfully."""
    env = os.environ if env is None else env
    scheme = urlsplit(uri).scheme
    if scheme == "sqlite":
        from ._sqlite import SqliteStore, usable

        if usable(uri, env):
            return SqliteStore(uri)
    elif scheme in ("http", "https"):
        from ._rest import RestStore, usable as rest_usable

        if rest_usable(env):
            return RestStore(uri, env)
    return _mlflow_store(uri)


def _mlflow_store(uri: str) -> Store:
    try:
        from ._client import ClientStore
    except ImportError as exc:  # mlflow is not installed
        raise TrackingError(f"the tracking store {uri} needs MLflow, which is not installed ({exc}); "
                            "pip install 'distcomp[mlflow]', or pass --no-tracking") from None
    return ClientStore(uri)
