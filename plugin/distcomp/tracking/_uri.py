"""The tracking URI a job uses: ``MLFLOW_TRACKING_URI``, else ``sqlite:///mlflow.db`` here.

Ranks run in the component's folder, so a relative SQLite path is made absolute first:
every rank must open the same database the launcher created the run in.
"""

from __future__ import annotations

import os
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


def usable_uri(env: Mapping[str, str], cwd: Path) -> str:
    """``resolve_uri``, and a SQLite database that can be opened or created there: asked before
    MLflow is, which retries a folder or a missing folder for a minute and more before it gives up."""
    uri = resolve_uri(env, cwd)
    path = sqlite_path(uri)
    why = _database_problem(Path(path.partition("?")[0])) if path is not None else None
    if why:
        given = env.get("MLFLOW_TRACKING_URI", "").strip() or DEFAULT_URI
        raise TrackingError(f"MLFLOW_TRACKING_URI={given!r}: {why}; name a database file in a folder you can "
                            f"write, e.g. {DEFAULT_URI}, or pass --no-tracking")
    return uri


def _database_problem(db: Path) -> str | None:
    """Why SQLite cannot open or create the database file ``db``, or None: asked before MLflow is."""
    try:
        if db.is_dir():
            return f"{db} is a folder"
        if db.exists():
            return None if os.access(db, os.R_OK | os.W_OK) else f"{db} cannot be read and written"
        folder = db.parent
        if not folder.exists():
            return f"its folder {folder} does not exist"
        if not folder.is_dir():
            return f"{folder} is not a folder"
        return None if os.access(folder, os.W_OK | os.X_OK) else f"its folder {folder} cannot be written"
    except OSError as exc:  # a name too long, a folder that cannot be read, ...
        return f"{db} is not a usable path ({exc.strerror or exc})"
