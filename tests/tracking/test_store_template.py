"""A new SQLite store is a copy of the empty database MLflow made before (mlstore/_template.py):
every table, row and schema line is what MLflow itself makes in that folder, but for the
Default experiment's times; making it imports no MLflow; a broken kept copy, an existing
database or MLflow's workspaces leave MLflow to make it, as before."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import pytest

from distcomp.mlstore._template import from_template, template_path

from ..targets._jobs import clean_env

OPEN = """
import sys
from distcomp.mlstore import open_store
store = open_store(sys.argv[1])
print(type(store).__name__, "mlflow" in sys.modules)
"""


def _open(uri: str, cwd: Path, cache: Path, **extra: str) -> str:
    done = subprocess.run([sys.executable, "-c", OPEN, uri], cwd=cwd, capture_output=True, text=True, timeout=120,
                          env=clean_env(XDG_CACHE_HOME=str(cache), **extra))
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def _dump(db: Path) -> dict[str, object]:
    """Every schema line and every table's rows, the Default experiment's two times left out."""
    with closing(sqlite3.connect(db)) as c:
        # each statement's lines as a set: MLflow's own databases differ in the order of a table's
        # constraints from one making to the next (its migrations iterate over sets)
        schema = sorted(sorted(line.strip().rstrip(",") for line in (row[0] or "").splitlines())
                        for row in c.execute("SELECT sql FROM sqlite_master"))
        tables = [row[0] for row in c.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        rows = {t: sorted(map(repr, c.execute(f'SELECT * FROM "{t}"'))) for t in tables if t != "experiments"}
        rows["experiments"] = c.execute("SELECT experiment_id, name, artifact_location, lifecycle_stage, workspace "
                                        "FROM experiments").fetchall()
    return {"schema": schema, "rows": rows}


@pytest.mark.slow
def test_a_new_store_is_what_mlflow_makes_there_and_costs_no_mlflow_import(tmp_path: Path) -> None:
    cache, first, here = tmp_path / "cache", tmp_path / "first", tmp_path / "here"
    first.mkdir()
    here.mkdir()
    # the first new store: MLflow makes it (imported), and its empty database is kept
    assert _open(f"sqlite:///{first / 'a.db'}", first, cache) == "ClientStore True"
    kept = list((cache / "distcomp" / "mlflow-stores").iterdir())
    assert [p.name for p in kept] == [f"mlflow-{__import__('mlflow').__version__}.db"]
    # the next, in another folder: the kept copy, written by the direct writer, no MLflow
    assert _open(f"sqlite:///{here / 'b.db'}", here, cache) == "SqliteStore False"
    assert sorted(p.name for p in here.iterdir()) == ["b.db", "b.db.lock"]  # nothing half made beside it
    # ... and it is what MLflow itself makes in that folder
    code = "import sys, mlflow; mlflow.MlflowClient(sys.argv[1]).search_experiments()"
    subprocess.run([sys.executable, "-c", code, f"sqlite:///{here / 'c.db'}"], cwd=here, check=True,
                   capture_output=True, timeout=120, env=clean_env())
    made, mlflows = _dump(here / "b.db"), _dump(here / "c.db")
    assert made == mlflows
    assert made["rows"]["experiments"][0][:3] == (0, "Default", f"{here}/mlruns/0")  # type: ignore[index]
    with closing(sqlite3.connect(here / "b.db")) as c:
        created = c.execute("SELECT creation_time FROM experiments").fetchone()[0]
    with closing(sqlite3.connect(first / "a.db")) as c:
        assert created > c.execute("SELECT creation_time FROM experiments").fetchone()[0]  # its own time


@pytest.mark.slow
def test_a_broken_kept_copy_or_workspaces_leave_it_to_mlflow(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    kept = template_path({"XDG_CACHE_HOME": str(cache)})
    assert kept is not None
    kept.parent.mkdir(parents=True)
    kept.write_text("not a database")
    assert _open(f"sqlite:///{tmp_path / 'a.db'}", tmp_path, cache) == "ClientStore True"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.db", "a.db.lock", "cache"]
    assert kept.read_text() == "not a database"  # not replaced: it is the user's to remove
    assert template_path({"XDG_CACHE_HOME": str(cache), "MLFLOW_ENABLE_WORKSPACES": "true"}) is None
    assert template_path({"XDG_CACHE_HOME": str(cache), "MLFLOW_WORKSPACE": "team"}) is None


def test_an_existing_database_is_never_replaced(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    kept = template_path({"XDG_CACHE_HOME": str(cache)})
    assert kept is not None
    kept.parent.mkdir(parents=True)
    with closing(sqlite3.connect(kept)) as c, c:
        c.execute("CREATE TABLE experiments (experiment_id INTEGER, artifact_location TEXT, creation_time INTEGER, "
                  "last_update_time INTEGER)")
        c.execute("INSERT INTO experiments VALUES (0, 'x', 0, 0)")
    db = tmp_path / "mine.db"
    db.write_bytes(b"the user's")
    assert not from_template(db, {"XDG_CACHE_HOME": str(cache)})
    assert db.read_bytes() == b"the user's"
    assert from_template(tmp_path / "new.db", {"XDG_CACHE_HOME": str(cache)})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache", "mine.db", "new.db"]
