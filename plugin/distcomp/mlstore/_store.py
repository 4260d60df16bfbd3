"""What the launcher needs from an MLflow store, and which implementation serves a URI.

Creating the run must not cost the ranks the ~1.5-2.5 s of ``import mlflow``, so the two
common stores are written directly: a SQLite database (MLflow's schema, checked first by its
alembic revision and its columns) and an MLflow server (its REST API, over urllib). Anything
else goes through MLflow itself.

A SQLite database that is not ready (new, or half made) is opened by MLflow under an
exclusive lock on ``FILE.lock`` beside it: several jobs starting at once on a new store would
otherwise each run MLflow's table creation and migrations over the others'. A new one is a copy
of the empty database MLflow made before, where one is kept (``_template``).
"""

from __future__ import annotations

import copy
import os
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator, Mapping, Protocol, Sequence
from urllib.parse import urlsplit

from ._mlflow import mlflow_store as _mlflow_store
from ._records import Metric, RunData, RunRef, StoredRun, TrackingError
from ._uri import sqlite_path

if TYPE_CHECKING:
    from ._retry import Retry

__all__ = ["Store", "open_store", "within"]


class Store(Protocol):
    uri: str

    def experiment(self, name: str, tags: Mapping[str, str] = {}) -> str:
        """The id of the active experiment ``name``, created (with ``tags``) when missing; an
        experiment that exists keeps its tags."""

    def create_run(self, experiment_id: str, name: str, tags: Mapping[str, str],
                   params: Mapping[str, str]) -> RunRef: ...

    def get_run(self, run_id: str) -> RunRef: ...

    def run_data(self, run_id: str) -> RunData:
        """The run's tags and params as they are now."""

    def log(self, run_id: str, tags: Mapping[str, str], params: Mapping[str, str] = {},
            metrics: Sequence[Metric] = ()) -> list[str]:
        """Set tags, add params and metric points; returns problems (a param that already has
        another value: kept, as MLflow keeps it; the other params are added). Raises
        StoreUnavailable when the store did not answer (worth trying again), TrackingError when
        it refused."""

    def upload(self, run: RunRef, files: Sequence[tuple[Path, str]]) -> None:
        """Copy each local file to its artifact path (``logs/rank0.log``) in the run."""

    def terminate(self, run_id: str, status: str, end_ms: int | None = None) -> None:
        """End the run with ``status`` at ``end_ms`` (ms since the epoch; default: now)."""

    def reopen(self, run_id: str) -> None:
        """Mark an ended run RUNNING again, with no end time: a resumed job goes on in it."""

    def runs_since(self, experiment_id: str, since_ms: int) -> list[StoredRun]:
        """The active runs of the experiment started at or after ``since_ms`` (at most 1000)."""


def open_store(uri: str, env: Mapping[str, str] | None = None, retry: "Retry | None" = None,
               notify: Callable[[str], None] | None = None) -> Store:
    """The fastest store that can write ``uri`` faithfully; ``retry`` (for a server) defaults to
    MLflow's own policy from ``env``. ``notify`` is told why a SQLite database MLflow made goes
    through MLflow's own store (a schema the direct writer does not know); the launcher passes
    it, the ranks do not: the job says it once."""
    env = os.environ if env is None else env
    scheme = urlsplit(uri).scheme
    if scheme == "sqlite":
        from ._sqlite import SqliteStore, refusal
        from ._template import from_template, keep_template

        if refusal(uri, env) is None:
            return SqliteStore(uri)
        path = sqlite_path(uri)
        if path and "?" not in path:
            db = Path(path)
            with _creation_lock(db):
                why = refusal(uri, env)
                if why is None:  # another job made it while we waited
                    return SqliteStore(uri)
                new = not db.exists()
                if new and from_template(db, env):  # the empty database MLflow made before (_template.py)
                    if refusal(uri, env) is None:
                        return SqliteStore(uri)
                    db.unlink()  # made just now, by us, under the lock (it was not there): MLflow makes it instead
                if why and notify is not None:
                    notify(why)
                store = _mlflow_store(uri)
                store.ready()  # MLflow makes the tables now, under the lock
                if new:
                    keep_template(db, env)
                return store
    elif scheme in ("http", "https"):
        from ._rest import RestStore, usable as rest_usable

        if rest_usable(env):
            return RestStore(uri, env, retry)
    return _mlflow_store(uri)


def within(store: Store, seconds: float) -> Store:
    """``store``, giving each request up ``seconds`` from now instead of after MLflow's ~4 minutes
    of retries (an MLflow server's; a SQLite database waits at most its 30 s lock timeout)."""
    from ._retry import Retry

    retry = getattr(store, "retry", None)
    if not isinstance(retry, Retry):
        return store
    quick = copy.copy(store)
    quick.retry = retry.within(seconds)  # type: ignore[attr-defined]
    return quick


@contextmanager
def _creation_lock(db: Path) -> Iterator[None]:
    """Held while MLflow opens a database that is not ready; a no-op where flock is missing."""
    try:
        import fcntl
    except ImportError:  # not POSIX: no lock, as before
        yield
        return
    lock = db.with_name(db.name + ".lock")
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise TrackingError(f"cannot create the MLflow database {db}: {exc.strerror} ({lock}); check that the "
                            "folder exists and is writable, or set MLFLOW_TRACKING_URI to another file") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # released when fd closes, also if this process dies
        yield
    finally:
        os.close(fd)
