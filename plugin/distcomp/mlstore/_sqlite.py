"""Write runs straight into MLflow's SQLite database with the stdlib ``sqlite3``.

Only when the database already exists (MLflow created it and owns its migrations), is stamped
with a schema revision this module was made for (``_revisions``) and its tables have the
columns this module writes; otherwise ``open_store`` falls back to MLflow itself. The rows are
those ``SqlAlchemyStore.create_experiment/create_run`` write (tests compare the two).

Why not MLflow's own store: ``benchmarks/tracking.py`` (d) measures it (docs/benchmarks.md has the ratio).
"""

from __future__ import annotations

import math
import os
import sqlite3
import time
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Iterator, Mapping, Sequence

from ._artifacts import copy_files, local_root, upload_with_mlflow
from ._params import conflict, fit
from ._records import (Metric, RunData, RunRef, StoredRun, StoreUnavailable, TrackingError,
                       user as _user)
from ._revisions import refusal as _revision_refusal
from ._uri import sqlite_path

# table -> the columns written here; a database whose tables differ (another MLflow schema)
# is left to MLflow. Extra nullable or defaulted columns are fine.
_COLUMNS = {
    "experiments": {"experiment_id", "name", "artifact_location", "lifecycle_stage", "creation_time",
                    "last_update_time"},
    "runs": {"run_uuid", "name", "source_type", "source_name", "entry_point_name", "user_id", "status",
             "start_time", "end_time", "source_version", "lifecycle_stage", "artifact_uri", "experiment_id",
             "deleted_time"},
    "tags": {"key", "value", "run_uuid"},
    "experiment_tags": {"key", "value", "experiment_id"},
    "params": {"key", "value", "run_uuid"},
    "metrics": {"key", "value", "timestamp", "run_uuid", "step", "is_nan"},
    "latest_metrics": {"key", "value", "timestamp", "step", "is_nan", "run_uuid"},
}
_MAX_FLOAT = 1.7976931348623157e308  # SQL has no inf: MLflow stores +-inf as the largest float
_WORKSPACE = "default"  # MLflow's single workspace when workspaces are off
ARTIFACT_ROOT = "mlruns"  # MLflow's default artifact root for a database store, under the cwd


def refusal(uri: str, env: Mapping[str, str]) -> str | None:
    """None when this module can write ``uri`` as MLflow would; else why not, worth a notice
    when the database is there but its schema is not one this module knows ("" otherwise: not
    made yet, or MLflow's workspaces are on)."""
    path = sqlite_path(uri)
    if path is None or "?" in path or not Path(path).is_file():
        return ""
    if env.get("MLFLOW_ENABLE_WORKSPACES", "").lower() in ("1", "true") or env.get("MLFLOW_WORKSPACE"):
        return ""
    try:
        with closing(_connect(Path(path))) as db:
            why = _revision_refusal(db)
            if why is None and not _schema_ok(db):
                why = "tables that differ from MLflow's; writing through MLflow's own store instead"
    except sqlite3.Error:  # not a database, say: MLflow's own store says what is wrong
        return ""
    return None if why is None else f"the MLflow database {path} has {why}"


def _connect(path: Path) -> sqlite3.Connection:
    # a rank or another job may hold the write lock briefly; MLflow's engine waits too
    return sqlite3.connect(path, timeout=30, isolation_level=None)


def _schema_ok(db: sqlite3.Connection) -> bool:
    for table, wanted in _COLUMNS.items():
        columns = {row[1]: row for row in db.execute(f"PRAGMA table_info({table})")}
        if not wanted <= columns.keys():
            return False
        for name, (_cid, _name, _type, notnull, default, pk) in columns.items():
            if name not in wanted and notnull and default is None and not pk and name != "workspace":
                return False  # a required column this module would not fill
    return True


def _now() -> int:
    return int(time.time() * 1000)


class SqliteStore:
    def __init__(self, uri: str) -> None:
        self.uri = uri
        self.path = Path(sqlite_path(uri) or "")

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One transaction, taken for writing up front so concurrent writers queue, not fail."""
        try:
            db = _connect(self.path)
        except sqlite3.Error as exc:
            raise TrackingError(f"cannot open the MLflow database {self.path}: {exc}") from None
        try:
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")
        except sqlite3.Error as exc:  # locked past the timeout, a full disk: worth trying again later
            transient = isinstance(exc, sqlite3.OperationalError) and not str(exc).startswith("no such")
            raise (StoreUnavailable if transient else TrackingError)(
                f"cannot write the MLflow database {self.path}: {exc}") from None
        finally:
            db.close()

    def _has_workspace(self, db: sqlite3.Connection) -> bool:
        return any(row[1] == "workspace" for row in db.execute("PRAGMA table_info(experiments)"))

    def experiment(self, name: str, tags: Mapping[str, str] = {}) -> str:
        with self._write() as db:
            ws = self._has_workspace(db)
            query = "SELECT experiment_id, lifecycle_stage FROM experiments WHERE name = ?"
            row = db.execute(query + (" AND workspace = ?" if ws else ""),
                             (name, _WORKSPACE) if ws else (name,)).fetchone()
            if row is not None:
                if row[1] != "active":
                    raise TrackingError(f"experiment {name!r} is deleted in {self.uri}; restore it "
                                        f"(mlflow experiments restore --experiment-id {row[0]}) or pick "
                                        "another with --experiment")
                return str(row[0])
            now = _now()
            columns = "name, artifact_location, lifecycle_stage, creation_time, last_update_time"
            values: tuple[object, ...] = (name, None, "active", now, now)
            if ws:
                columns, values = columns + ", workspace", values + (_WORKSPACE,)
            cursor = db.execute(f"INSERT INTO experiments ({columns}) VALUES ({', '.join('?' * len(values))})",
                                values)
            experiment_id = cursor.lastrowid
            root = Path.cwd() / ARTIFACT_ROOT  # where MLflow's store puts it: resolved from the cwd
            db.execute("UPDATE experiments SET artifact_location = ? WHERE experiment_id = ?",
                       (f"{root}/{experiment_id}", experiment_id))
            db.executemany("INSERT INTO experiment_tags (key, value, experiment_id) VALUES (?, ?, ?)",
                           [(k, v, experiment_id) for k, v in tags.items()])
            return str(experiment_id)

    def create_run(self, experiment_id: str, name: str, tags: Mapping[str, str],
                   params: Mapping[str, str]) -> RunRef:
        run_id = os.urandom(16).hex()  # MLflow's run ids: uuid4().hex, 32 hex digits
        with self._write() as db:
            row = db.execute("SELECT artifact_location, lifecycle_stage FROM experiments WHERE experiment_id = ?",
                             (int(experiment_id),)).fetchone()
            if row is None or row[1] != "active":
                raise TrackingError(f"experiment {experiment_id} is missing or deleted in {self.uri}")
            artifact_uri = f"{row[0].rstrip('/')}/{run_id}/artifacts"
            user = tags.get("mlflow.user") or _user()
            db.execute(
                "INSERT INTO runs (run_uuid, name, source_type, source_name, entry_point_name, user_id, status, "
                "start_time, end_time, deleted_time, source_version, lifecycle_stage, artifact_uri, experiment_id) "
                "VALUES (?, ?, 'UNKNOWN', '', '', ?, 'RUNNING', ?, NULL, NULL, '', 'active', ?, ?)",
                (run_id, name, user, _now(), artifact_uri, int(experiment_id)))
            tags, params = fit(tags, params)
            all_tags = {"mlflow.runName": name, "mlflow.user": user, **tags}
            db.executemany("INSERT INTO tags (key, value, run_uuid) VALUES (?, ?, ?)",
                           [(k, v, run_id) for k, v in all_tags.items()])
            db.executemany("INSERT INTO params (key, value, run_uuid) VALUES (?, ?, ?)",
                           [(k, v, run_id) for k, v in params.items()])
        return RunRef(run_id, experiment_id, artifact_uri, name)

    def get_run(self, run_id: str) -> RunRef:
        with self._write() as db:
            row = db.execute("SELECT experiment_id, artifact_uri, name, lifecycle_stage FROM runs "
                             "WHERE run_uuid = ?", (run_id,)).fetchone()
        if row is None or row[3] != "active":
            raise TrackingError(f"MLflow run {run_id} does not exist (or is deleted) in {self.uri}")
        return RunRef(run_id, str(row[0]), row[1], row[2] or "")

    def runs_since(self, experiment_id: str, since_ms: int) -> list[StoredRun]:
        with self._write() as db:
            rows = db.execute("SELECT run_uuid, name, start_time FROM runs WHERE experiment_id = ? AND "
                              "start_time >= ? AND lifecycle_stage = 'active' ORDER BY start_time LIMIT 1000",
                              (int(experiment_id), since_ms)).fetchall()
            found = []
            for run_id, name, start in rows:
                tags = dict(db.execute("SELECT key, value FROM tags WHERE run_uuid = ?", (run_id,)).fetchall())
                found.append(StoredRun(run_id, name or "", experiment_id, int(start or 0), tags))
        return found

    def run_data(self, run_id: str) -> RunData:
        with self._write() as db:
            tags = dict(db.execute("SELECT key, value FROM tags WHERE run_uuid = ?", (run_id,)).fetchall())
            params = dict(db.execute("SELECT key, value FROM params WHERE run_uuid = ?", (run_id,)).fetchall())
        return RunData(tags, params)

    def log(self, run_id: str, tags: Mapping[str, str], params: Mapping[str, str] = {},
            metrics: Sequence[Metric] = ()) -> list[str]:
        problems = []
        tags, params = fit(tags, params)
        with self._write() as db:
            row = db.execute("SELECT lifecycle_stage FROM runs WHERE run_uuid = ?", (run_id,)).fetchone()
            if row is None or row[0] != "active":
                raise TrackingError(f"MLflow run {run_id} does not exist (or is deleted) in {self.uri}")
            db.executemany("INSERT OR REPLACE INTO tags (key, value, run_uuid) VALUES (?, ?, ?)",
                           [(k, v, run_id) for k, v in tags.items()])
            for key, value in params.items():
                old = db.execute("SELECT value FROM params WHERE key = ? AND run_uuid = ?", (key, run_id)).fetchone()
                if old is None:
                    db.execute("INSERT INTO params (key, value, run_uuid) VALUES (?, ?, ?)", (key, value, run_id))
                elif old[0] != value:
                    problems.append(conflict(run_id, key, old[0], value))
            if metrics:
                _log_metrics(db, run_id, metrics)
        return problems

    def upload(self, run: RunRef, files: Sequence[tuple[Path, str]]) -> None:
        root = local_root(run.artifact_uri)
        if root is None:
            upload_with_mlflow(self.uri, run.run_id, files)
        else:
            copy_files(root, files)

    def reopen(self, run_id: str) -> None:
        with self._write() as db:
            db.execute("UPDATE runs SET status = 'RUNNING', end_time = NULL WHERE run_uuid = ?", (run_id,))

    def terminate(self, run_id: str, status: str, end_ms: int | None = None) -> None:
        with self._write() as db:
            db.execute("UPDATE runs SET status = ?, end_time = ? WHERE run_uuid = ?",
                       (status, end_ms or _now(), run_id))


def _sanitize(value: float) -> tuple[float, int]:
    """(value, is_nan) as SqlAlchemyStore.sanitize_metric_value stores them."""
    if math.isnan(value):
        return 0.0, 1
    if math.isinf(value):
        return (_MAX_FLOAT if value > 0 else -_MAX_FLOAT), 0
    return value, 0


def _log_metrics(db: sqlite3.Connection, run_id: str, metrics: Sequence[Metric]) -> None:
    """The points (a repeated identical point is stored once) and each key's latest point,
    "latest" meaning the largest (step, timestamp, value), as MLflow keeps it."""
    rows = []
    latest: dict[str, tuple[int, int, float, int]] = {}
    for m in metrics:
        value, is_nan = _sanitize(m.value)
        rows.append((m.key, value, m.timestamp, run_id, m.step, is_nan))
        point = (m.step, m.timestamp, value, is_nan)
        if m.key not in latest or point[:3] > latest[m.key][:3]:
            latest[m.key] = point
    db.executemany("INSERT OR IGNORE INTO metrics (key, value, timestamp, run_uuid, step, is_nan) "
                   "VALUES (?, ?, ?, ?, ?, ?)", rows)
    for key, (step, timestamp, value, is_nan) in latest.items():
        old = db.execute("SELECT step, timestamp, value FROM latest_metrics WHERE run_uuid = ? AND key = ?",
                         (run_id, key)).fetchone()
        if old is None or (step, timestamp, value) > tuple(old):
            db.execute("INSERT OR REPLACE INTO latest_metrics (key, value, timestamp, step, is_nan, run_uuid) "
                       "VALUES (?, ?, ?, ?, ?, ?)", (key, value, timestamp, step, is_nan, run_id))
