"""Which MLflow database schemas the direct SQLite writer (``_sqlite``) may write.

MLflow stamps its database with the alembic revision of its newest migration
(``alembic_version.version_num``). ``_sqlite`` fills MLflow's private tables by hand, so it
writes only a database stamped with a revision listed here: the head revision of every MLflow
release pyproject accepts (``mlflow>=3.7``), read from each release's
``mlflow/store/db_migrations/versions/``. Between 3.7's head and 3.17's, the migrations touch the
tables the writer fills only thus: ``experiments`` gains ``workspace`` (3.10; the writer fills it
where it exists), ``metrics`` an index (3.12), ``experiment_tags.value`` a longer type (3.16),
``endpoints`` and ``trace_info`` foreign keys to ``experiments`` (3.10, 3.15). Any other
revision (a newer MLflow, an older one, a database half made) goes to MLflow's own store.

tests/tracking/test_mlflow_versions.py makes a store with an MLflow's own migrations, writes a
run with ``_sqlite``, writes the same run with that MLflow's client and compares rows and what
that MLflow reads back: always with the oldest accepted MLflow (from PyPI) and the installed one;
every release listed here passed it (``DISTCOMP_TEST_MLFLOW="3.8.0 3.9.0 ..."`` runs it for
more). A new MLflow release: read its migrations since the last head here, run that test with
it, then add its head.
"""

from __future__ import annotations

import sqlite3

# head revision -> the MLflow releases that create it
HEADS = {
    "bf29a5ff90ea": "3.7.0",
    "1bd49d398cd23": "3.8.0-3.8.1",
    "d3e4f5a6b7c8": "3.9.0",
    "1b5f0d9ad7c1": "3.10.0-3.10.1",
    "c3d6457b6d8a": "3.11.1",
    "7d34483879f0": "3.12.0",
    "da6fb0208061": "3.13.0",
    "b7e4c1a90f23": "3.14.0",
    "6f8d9c3b2a1e": "3.15.0-3.15.2",
    "b7e2c1a4d9f3": "3.16.0-3.16.1",
    "dc11669786a5": "3.17.0-3.17.2",
}
_RELEASES = list(HEADS.values())
KNOWN = f"MLflow {_RELEASES[0].split('-')[0]} to {_RELEASES[-1].split('-')[-1]}"


def revision(db: sqlite3.Connection) -> str | None:
    """The database's alembic revision; None when it has none (not made by MLflow, or not yet)."""
    try:
        rows = db.execute("SELECT version_num FROM alembic_version").fetchall()
    except sqlite3.OperationalError:  # no such table
        return None
    return str(rows[0][0]) if len(rows) == 1 else None


def refusal(db: sqlite3.Connection) -> str | None:
    """Why the writer must leave this database to MLflow; None when its revision is known."""
    found = revision(db)
    if found in HEADS:
        return None
    what = f"schema revision {found}" if found else "no MLflow schema revision"
    return (f"{what}, which distcomp's direct SQLite writer was not made for (it knows {KNOWN}'s); "
            "writing through MLflow's own store instead (slower: each process that logs imports mlflow)")
