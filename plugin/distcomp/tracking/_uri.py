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
