"""The tracking URI a job uses: ``MLFLOW_TRACKING_URI``, else ``sqlite:///mlflow.db`` here.

Ranks run in the component's folder, so a relative SQLite path is made absolute first:
every rank must open the same database the launcher created the run in. ``normalise`` is how
two URIs are told to name the same store (the job's, and one a script sets).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping
from urllib.parse import unquote, urlsplit, urlunsplit

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


_DEFAULT_PORTS = {"http": 80, "https": 443}


def normalise(uri: str, cwd: Path | None = None) -> str:
    """One spelling per store, to compare two URIs: the scheme and host in lower case, a default
    port and trailing slashes dropped (``HTTP://Host:80/`` is ``http://host``), a SQLite or
    ``file:`` path made absolute from ``cwd`` (default: this process's folder) and normalised,
    a plain path read as ``file:`` (as MLflow reads it). Other URIs keep all but their scheme's case."""
    text = uri.strip()
    parts = urlsplit(text)
    scheme = parts.scheme.lower()
    base = cwd if cwd is not None else Path.cwd()
    if scheme == "" and text != "databricks":  # a plain path: MLflow's file store
        return "file://" + os.path.normpath(base / os.path.expanduser(text))
    if scheme == "file":
        return "file://" + os.path.normpath(base / unquote(parts.path))
    if scheme == "sqlite":  # sqlite:///relative/path, sqlite:////absolute/path (SQLAlchemy's forms)
        rest, sep, query = text[len("sqlite:"):].partition("?")
        path = rest[3:] if rest.startswith("///") else rest.lstrip("/")
        if path not in ("", ":memory:"):
            path = os.path.normpath(base / path)
        return "sqlite:///" + path + sep + query
    if scheme in _DEFAULT_PORTS:
        host = (parts.hostname or "").lower()
        if ":" in host:  # IPv6
            host = f"[{host}]"
        try:
            port = parts.port
        except ValueError:  # not a port: no store to match, left as written
            return scheme + text[len(parts.scheme):]
        netloc = (parts.netloc.rpartition("@")[0] + "@" if "@" in parts.netloc else "") + host + \
            (f":{port}" if port is not None and port != _DEFAULT_PORTS[scheme] else "")
        return urlunsplit((scheme, netloc, parts.path.rstrip("/"), parts.query, parts.fragment))
    return scheme + text[len(parts.scheme):]
