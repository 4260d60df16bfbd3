"""The tracking URI a job uses: ``MLFLOW_TRACKING_URI``, else ``sqlite:///mlflow.db`` here.

Ranks run in the component's folder, so a relative SQLite path is made absolute first:
every rank must open the same database the launcher created the run in.
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping
from urllib.parse import urlsplit

from ._records import TrackingError

DEFAULT_URI = "sqlite:///mlflow.db"


def sqlite_path(uri: str) -> str | None:
    """The database path of a ``sqlite:///`` URI (as written), or None for other URIs."""
    if not uri.startswith("sqlite:///"):
        return None
    return uri[len("sqlite:///"):]


def resolve_uri(env: Mapping[str, str], cwd: Path) -> str:
    """The absolute tracking URI; raises TrackingError for stores MLflow no longer supports."""
    uri = env.get("MLFLOW_TRACKING_URI", "").strip() or DEFAULT_URI
    scheme = urlsplit(uri).scheme
    if scheme in ("", "file"):
        raise TrackingError(
            f"MLFLOW_TRACKING_URI={uri!r} is MLflow's file store, which MLflow 3.13+ refuses; "
            f"use a database ({DEFAULT_URI}) or a server (http://HOST:PORT), or pass --no-tracking")
    path = sqlite_path(uri)
    if path is None:
        if scheme == "sqlite":
            raise TrackingError(f"MLFLOW_TRACKING_URI={uri!r}: a SQLite URI is sqlite:///PATH "
                                "(three slashes, then the file)")
        return uri
    if path in ("", ":memory:"):
        raise TrackingError(f"MLFLOW_TRACKING_URI={uri!r}: an in-memory database cannot be shared with the "
                            "ranks; name a file, e.g. sqlite:///mlflow.db")
    if path.startswith("/"):  # already absolute: sqlite:////abs/path
        return uri
    return "sqlite:///" + str((cwd / path).absolute())
