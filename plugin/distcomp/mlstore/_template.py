"""A new SQLite store made from the empty database MLflow made before, kept per MLflow version.

MLflow makes a database by creating its tables and running every migration since its first
schema: ~4 s of CPU and an ``import mlflow`` for the first job on each new store (and for nearly
every test of a suite that gives each test its own store). The first empty database MLflow
makes here is copied, whole, to ``$XDG_CACHE_HOME/distcomp/mlflow-stores/mlflow-VERSION.db``
(default ``~/.cache``). A later new store is a copy of it with the one row that depends on
where and when it was made, MLflow's Default experiment: its artifact location under the cwd
and its times, as MLflow writes them (tests/tracking/test_store_template.py compares every
table with a database MLflow made). Only a path where no database is yet is made so, under
the store's creation lock, and never where MLflow's workspaces are on; the direct writer then
checks its schema as for any store."""

from __future__ import annotations

import os
import sqlite3
import tempfile
import time
from contextlib import closing
from pathlib import Path
from typing import Mapping

from ..base.cachedir import cache_dir
from ._sqlite import ARTIFACT_ROOT

__all__ = ["from_template", "keep_template", "template_path"]

_DEFAULT = 0  # MLflow's Default experiment, the one row a new database holds that depends on it


def template_path(env: Mapping[str, str]) -> Path | None:
    """Where the empty database of the installed MLflow is kept; None without MLflow or where
    MLflow's workspaces are on (a database made then differs)."""
    if env.get("MLFLOW_ENABLE_WORKSPACES", "").lower() in ("1", "true") or env.get("MLFLOW_WORKSPACE"):
        return None
    from importlib.metadata import PackageNotFoundError, version

    try:
        mlflow = version("mlflow")
    except PackageNotFoundError:
        return None
    return Path(cache_dir("mlflow-stores", f"mlflow-{mlflow}.db", env=env))


def from_template(db: Path, env: Mapping[str, str]) -> bool:
    """Make the new database ``db`` from the kept one; False (and nothing written) where there is
    none, or it cannot be read, or ``db`` exists already."""
    template = template_path(env)
    if template is None or not template.is_file() or db.exists():
        return False
    try:  # a file of our own (made exclusively, so never one of the user's), linked whole: no reader sees half
        tmp = _own_tmp(db)
    except OSError:
        return False
    try:
        with closing(sqlite3.connect(template)) as source, closing(sqlite3.connect(tmp)) as copy:
            source.backup(copy)
            now = int(time.time() * 1000)
            with copy:  # as MLflow's store writes it: the default artifact root resolved from the cwd
                updated = copy.execute("UPDATE experiments SET artifact_location = ?, creation_time = ?, "
                                       "last_update_time = ? WHERE experiment_id = ?",
                                       (f"{Path.cwd() / ARTIFACT_ROOT}/{_DEFAULT}", now, now, _DEFAULT)).rowcount
        if updated != 1:
            raise sqlite3.DatabaseError("the kept database has no Default experiment")
        os.link(tmp, db)  # never over a database another process made meanwhile
        return True
    except (OSError, sqlite3.Error):  # a broken or foreign template, a race: MLflow makes it instead
        return False
    finally:
        try:
            os.unlink(tmp)
        except OSError:
            pass


def keep_template(db: Path, env: Mapping[str, str]) -> None:
    """Keep ``db``, a database MLflow has just made and nothing has written to yet, for the next
    new store; once per MLflow version. A failure keeps nothing, silently: the next new store is
    made by MLflow, as without it."""
    template = template_path(env)
    if template is None or template.exists():
        return
    tmp: Path | None = None
    try:
        with closing(sqlite3.connect(db)) as source:
            rows = source.execute("SELECT experiment_id FROM experiments").fetchall()
            runs = source.execute("SELECT COUNT(*) FROM runs").fetchone()
            if rows != [(_DEFAULT,)] or runs != (0,):  # written to already: not an empty database
                return
            template.parent.mkdir(parents=True, exist_ok=True)
            tmp = _own_tmp(template)
            with closing(sqlite3.connect(tmp)) as copy:
                source.backup(copy)
        os.replace(tmp, template)
        tmp = None  # the name is the template's now: nothing of ours left to remove
    except (OSError, sqlite3.Error):
        pass
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass


def _own_tmp(beside: Path) -> Path:
    """A new empty file beside ``beside``, created exclusively: the only file a failure removes."""
    fd, name = tempfile.mkstemp(prefix=f".{beside.name}.", suffix=".tmp", dir=beside.parent)
    try:
        umask = os.umask(0o022)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)  # the mode SQLite gives a database it creates, not mkstemp's 0600
    finally:
        os.close(fd)
    return Path(name)
