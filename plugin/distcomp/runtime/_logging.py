"""Metrics, params and artifacts into the job's one MLflow run, from the main rank only.

`distcomp run` creates the run before the ranks start and hands each rank its id
(DISTCOMP_MLFLOW_RUN_ID, kept because ``mlflow.start_run()`` deletes MLFLOW_RUN_ID) and
MLFLOW_TRACKING_URI. Every call is validated on every rank, so a bug in the training script
fails all ranks alike; then, on the main rank only, it is queued with its timestamp and
returns. A daemon thread sends what has piled up through ``distcomp.tracking``'s stores: a
SQLite database or an MLflow server written directly, as the launcher does (no seconds-long
``import mlflow`` competing with training), other stores through MLflow's client.
The queue is flushed by ``flush()``, at exit (an uncaught exception included) and on SIGTERM.
Other ranks, forked children (DataLoader workers) and processes without a run do nothing.
"""

from __future__ import annotations

import atexit
import operator
import os
import posixpath
import queue
import signal
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ._rankinfo import rank_info

# MLflow's limits, from mlflow/utils/validation.py (mlflow 3.x); checked here without importing it.
MAX_METRICS_PER_BATCH = 1000
MAX_PARAMS_TAGS_PER_BATCH = 100
MAX_ENTITIES_PER_BATCH = 1000
MAX_ENTITY_KEY_LENGTH = 250
_NAME_PUNCTUATION = "_/.- :"  # besides alphanumerics: validate_param_and_metric_name, non-Windows

SIGTERM_FLUSH_S = 3.0  # the launcher sends SIGKILL ~5 s after SIGTERM; DISTCOMP_SIGTERM_FLUSH_S overrides
EXIT_FLUSH_S = 300.0  # a normal exit may wait for a big artifact, but not forever
NO_RUN_NOTICE = ("distcomp.runtime: no MLflow run (not started by `distcomp run`, or tracking is off): "
                 "metrics are not logged")

PathArg = str | os.PathLike[str]


@dataclass(frozen=True, slots=True)
class _Metric:
    key: str
    value: float
    timestamp: int  # ms since the epoch, taken when the caller logged it
    step: int


@dataclass(frozen=True, slots=True)
class _Param:
    key: str
    value: str


@dataclass(frozen=True, slots=True)
class _Artifact:
    staged: str  # our private copy: the caller may change or delete the original right away
    artifact_path: str | None
    is_dir: bool
    staging_dir: str  # removed once sent


@dataclass(frozen=True, slots=True)
class _Flush:
    done: threading.Event


_Record = _Metric | _Param | _Artifact | _Flush


def _chunks(items: list, size: int) -> list[list]:
    return [items[i:i + size] for i in range(0, len(items), size)]


class _Sender:
    """The queue and the daemon thread that empties it into one MLflow run."""

    def __init__(self, run_id: str, tracking_uri: str | None) -> None:
        self.run_id, self.tracking_uri, self.pid = run_id, tracking_uri, os.getpid()
        self.queue: queue.SimpleQueue[_Record] = queue.SimpleQueue()  # put() is safe in signal handlers
        self._store: Any = None  # a distcomp.tracking Store, opened by the worker
        self._run: Any = None  # its RunRef, for artifacts
        self._warned: set[str] = set()
        self.thread = threading.Thread(target=self._loop, name="distcomp-mlflow", daemon=True)
        self.thread.start()

    def flush(self, timeout: float | None) -> bool:
        if not self.thread.is_alive():
            return self.queue.empty()
        done = threading.Event()
        self.queue.put(_Flush(done))
        return done.wait(timeout)

    def _warn(self, kind: str, message: str) -> None:
        """Once per kind of problem: a rank that logs every step must not flood stderr."""
        if kind in self._warned:
            return
        self._warned.add(kind)
        try:
            where = self.tracking_uri or "the default store"
            sys.stderr.write(f"distcomp.runtime: {message} (MLflow run {self.run_id} at {where}"
                             "; further errors of this kind are not shown)\n")
            sys.stderr.flush()
        except (OSError, ValueError):  # stderr closed at shutdown
            pass

    def _fail(self, what: str, exc: BaseException) -> None:
        text = (str(exc).strip().splitlines() or [""])[0][:300]
        self._warn(f"{what}:{type(exc).__name__}", f"could not log {what}: {type(exc).__name__}: {text}")

    def _loop(self) -> None:
        while True:
            records = [self.queue.get()]
            while True:  # take whatever piled up meanwhile: that is the batching
                try:
                    records.append(self.queue.get_nowait())
                except queue.Empty:
                    break
            try:
                self._send(records)
            except BaseException as exc:  # noqa: BLE001 - never let the thread die: flush() would wait in vain
                self._fail("records", exc)
                for r in records:
                    if isinstance(r, _Flush):
                        r.done.set()

    def _send(self, records: list[_Record]) -> None:
        params: list[_Param] = []
        metrics: list[_Metric] = []
        for r in records:
            if isinstance(r, _Metric):
                metrics.append(r)
            elif isinstance(r, _Param):
                params.append(r)
            else:  # an artifact or a flush waits for everything queued before it
                self._send_data(params, metrics)
                params, metrics = [], []
                if isinstance(r, _Artifact):
                    self._send_artifact(r)
                else:
                    r.done.set()
        self._send_data(params, metrics)

    def _connect(self) -> Any:
        """The store, opened on first send: SQLite or a server are written directly, as the
        launcher does (no seconds-long ``import mlflow`` competing with training); any other
        store goes through MLflow's client."""
        if self._store is None:
            from pathlib import Path

            from ..tracking import open_store, resolve_uri

            uri = self.tracking_uri or resolve_uri(os.environ, Path.cwd())
            self._store = open_store(uri, os.environ)
        return self._store

    def _send_data(self, params: list[_Param], metrics: list[_Metric]) -> None:
        if not params and not metrics:
            return
        try:
            store = self._connect()
        except Exception as exc:  # noqa: BLE001 - no mlflow for an exotic store, a bad URI: warn, never crash
            self._fail("params and metrics", exc)
            return
        from ..tracking import Metric

        # Params apart from metrics: a param that changed value must not cost any metric.
        unique = {p.key: p.value for p in params}
        if unique:
            try:
                for problem in store.log(self.run_id, {}, unique):
                    self._warn("params:changed", problem)
            except Exception as exc:  # noqa: BLE001
                self._fail("params", exc)
        for chunk in _chunks(metrics, min(MAX_METRICS_PER_BATCH, MAX_ENTITIES_PER_BATCH)):
            try:
                store.log(self.run_id, {}, metrics=[Metric(m.key, m.value, m.timestamp, m.step) for m in chunk])
            except Exception as exc:  # noqa: BLE001
                self._fail("metrics", exc)

    def _send_artifact(self, a: _Artifact) -> None:
        try:
            store = self._connect()
            if self._run is None:
                self._run = store.get_run(self.run_id)
            prefix = posixpath.join(a.artifact_path, "") if a.artifact_path else ""
            if a.is_dir:
                files = [(os.path.join(root, name),
                          prefix + posixpath.join(*os.path.relpath(os.path.join(root, name), a.staged).split(os.sep)))
                         for root, _dirs, names in os.walk(a.staged) for name in sorted(names)]
            else:
                files = [(a.staged, prefix + os.path.basename(a.staged))]
            from pathlib import Path

            store.upload(self._run, [(Path(f), path) for f, path in files])
        except Exception as exc:  # noqa: BLE001
            self._fail("artifacts", exc)
        finally:
            import shutil

            shutil.rmtree(a.staging_dir, ignore_errors=True)


# -- process state: resolved on first use, reset in forked children ------------------------

_lock = threading.Lock()
_resolved = False
_is_main = False
_sender: _Sender | None = None
_params: dict[str, str] = {}  # logged so far: MLflow refuses a changed value, say so on every rank
_good_keys: set[str] = set()  # names already validated (training loops repeat a few keys)


def _env_run_id() -> str | None:
    if os.environ.get("DISTCOMP_TRACKING") == "off":
        return None
    return os.environ.get("DISTCOMP_MLFLOW_RUN_ID") or os.environ.get("MLFLOW_RUN_ID") or None


def _active() -> _Sender | None:
    """The sender on the logging rank, else None; decides once, on the first call."""
    global _resolved, _is_main, _sender
    if _resolved:
        return _sender
    with _lock:
        if _resolved:
            return _sender
        _is_main = rank_info().is_main
        run = _env_run_id()
        if _is_main and run:
            _sender = _Sender(run, os.environ.get("MLFLOW_TRACKING_URI") or None)
            _register_at_exit()
            _install_sigterm()
        elif _is_main and os.environ.get("DISTCOMP_TRACKING") != "off":
            sys.stderr.write(NO_RUN_NOTICE + "\n")
            sys.stderr.flush()
        _resolved = True
        return _sender


def _main_rank() -> bool:
    _active()
    return _is_main


def _at_exit() -> None:
    sender = _sender
    if sender is None or sender.pid != os.getpid():
        return
    if not sender.flush(EXIT_FLUSH_S):
        sender._warn("exit", f"gave up waiting for MLflow after {EXIT_FLUSH_S:g} s at exit; "
                             "some metrics, params or artifacts were not logged")


def _register_at_exit() -> None:
    try:
        # mlflow imports concurrent.futures.thread, and that import fails once the interpreter
        # is shutting down: a script that logs and ends at once would flush into a failed import.
        import concurrent.futures.thread  # noqa: F401 - ~10 ms, once, on the logging rank only

        # Flush where threading's own exit hooks run: before thread pools refuse new work
        # (MLflow uploads artifacts with them) and before non-daemon threads are joined.
        threading._register_atexit(_at_exit)  # type: ignore[attr-defined]
    except (AttributeError, RuntimeError):  # another Python; or logging began during shutdown
        pass
    atexit.register(_at_exit)  # and what non-daemon threads log after that


def _sigterm_flush_s() -> float:
    try:
        return max(0.0, float(os.environ.get("DISTCOMP_SIGTERM_FLUSH_S", SIGTERM_FLUSH_S)))
    except ValueError:
        return SIGTERM_FLUSH_S


def _on_sigterm(signum: int, frame: object) -> None:
    sender = _sender
    if sender is not None and sender.pid == os.getpid():
        sender.flush(_sigterm_flush_s())
    # die of SIGTERM as if we had never been here: the launcher reads the exit status
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGTERM)


def _install_sigterm() -> None:
    # only where it is ours to take: signal.signal works in the main thread only, and a
    # handler the script (or a framework) installed wins
    if threading.current_thread() is threading.main_thread() and \
            signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _on_sigterm)


def _after_fork_in_child() -> None:
    """A DataLoader worker and the like: no thread came along, and only the parent logs."""
    global _lock, _resolved, _sender
    _lock = threading.Lock()  # another thread may have held it at the fork
    _resolved, _sender = True, None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


# -- validation: on every rank, before anything is queued ----------------------------------

def _key(key: object, what: str) -> str:
    if type(key) is str and key in _good_keys:  # fast path: a training loop repeats a few keys
        return key
    if not isinstance(key, str):
        raise TypeError(f"{what} key must be a str, not {type(key).__name__}")
    if not key:
        raise ValueError(f"{what} key must not be empty")
    if len(key) > MAX_ENTITY_KEY_LENGTH:
        raise ValueError(f"{what} key {key[:40]!r}... is longer than MLflow's {MAX_ENTITY_KEY_LENGTH} characters")
    if not all(c.isalnum() or c in _NAME_PUNCTUATION for c in key):  # the regex [/\w.\- :]*, without re
        raise ValueError(f"{what} key {key!r}: MLflow names may only contain alphanumerics, "
                         "underscores, dashes, periods, spaces, colons and slashes")
    norm = posixpath.normpath(key)
    if norm != key or norm == "." or norm.startswith(("..", "/")):
        raise ValueError(f"{what} key {key!r} is not a normalized relative path, as MLflow requires")
    if len(_good_keys) < 10_000:
        _good_keys.add(key)
    return key


def _value(key: str, value: object) -> float:
    if isinstance(value, (str, bytes)):
        raise TypeError(f"metric {key!r}: value must be a number, not {type(value).__name__}")
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError) as exc:
        raise TypeError(f"metric {key!r}: value {value!r} is not convertible to float ({exc})") from None


def _step(step: object) -> int:
    if step is None:
        return 0  # MLflow's default
    if isinstance(step, bool) or not hasattr(type(step), "__index__"):
        raise TypeError(f"step must be an int, not {type(step).__name__}")
    value = operator.index(step)  # type: ignore[arg-type]
    if not -2**63 <= value < 2**63:
        raise ValueError(f"step {value} does not fit MLflow's 64-bit integer")
    return value


def _param(key: object, value: object) -> _Param | None:
    """The record to queue, or None when the same value was logged already."""
    k = _key(key, "param")
    v = str(value)  # what MLflow stores
    old = _params.get(k)
    if old is not None and old != v:
        raise ValueError(f"param {k!r} was logged as {old!r}; MLflow refuses to change it to {v!r}")
    return None if old is not None else _Param(k, v)


def _local(path: object, what: str) -> str:
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"{what} must be a str or os.PathLike, not {type(path).__name__}")
    local = os.fspath(path)
    if not isinstance(local, str):
        raise TypeError(f"{what} must be a str path, not {type(local).__name__}")
    if not local:
        raise ValueError(f"{what} must not be empty")
    return local


def _artifact_path(artifact_path: object) -> str | None:
    if artifact_path is None:
        return None
    if not isinstance(artifact_path, str):
        raise TypeError(f"artifact_path must be a str or None, not {type(artifact_path).__name__}")
    if artifact_path.startswith("/") or ".." in artifact_path.split("/"):
        raise ValueError(f"artifact_path {artifact_path!r} must be relative, inside the run's artifacts")
    return artifact_path or None


# -- the API ----------------------------------------------------------------------------------

def run_id() -> str | None:
    """The job's MLflow run id, on every rank; None without a run or with tracking off."""
    return _env_run_id()


def is_logging_rank() -> bool:
    """True in the one process whose calls reach MLflow: the main rank, with a run."""
    return _active() is not None


def log_metrics(metrics: Mapping[str, float], step: int | None = None) -> None:
    """Queue several metrics at one step and one timestamp (ms, now)."""
    if not isinstance(metrics, Mapping):
        raise TypeError(f"metrics must be a mapping, not {type(metrics).__name__}")
    s = _step(step)
    values = [(_key(k, "metric"), _value(k, v)) for k, v in metrics.items()]  # all valid, or none queued
    sender = _active()
    if sender is not None:
        ts = time.time_ns() // 1_000_000
        for k, v in values:
            sender.queue.put(_Metric(k, v, ts, s))


def log_metric(key: str, value: float, step: int | None = None) -> None:
    """Queue one metric point, stamped now (ms)."""
    k = _key(key, "metric")
    record = _Metric(k, _value(k, value), time.time_ns() // 1_000_000, _step(step))
    sender = _active()
    if sender is not None:
        sender.queue.put(record)


def log_params(params: Mapping[str, Any]) -> None:
    """Queue params (values as ``str(value)``); a param keeps its first value, as in MLflow."""
    if not isinstance(params, Mapping):
        raise TypeError(f"params must be a mapping, not {type(params).__name__}")
    records = [r for r in (_param(k, v) for k, v in params.items()) if r is not None]  # all valid, or none queued
    sender = _active()
    for record in records:
        _params[record.key] = record.value
        if sender is not None:
            sender.queue.put(record)


def log_param(key: str, value: Any) -> None:
    """Queue one param; see log_params."""
    log_params({_key(key, "param"): value})


def _log_artifact(local_path: object, artifact_path: object, is_dir: bool) -> None:
    what = "local_dir" if is_dir else "local_path"
    local, dest = _local(local_path, what), _artifact_path(artifact_path)
    # The file is checked on the main rank only: it is often written by rank 0 alone, or
    # sits on rank 0's host, so other ranks cannot be expected to see it.
    if _main_rank() and not (os.path.isdir(local) if is_dir else os.path.isfile(local)):
        raise FileNotFoundError(f"{what} {local!r} is not an existing {'directory' if is_dir else 'file'}")
    sender = _active()
    if sender is None:
        return
    import shutil  # here: most ranks never log an artifact, and tempfile is not free to import
    import tempfile

    # A private copy, made now: MLflow's own call is synchronous, and scripts rely on
    # deleting or rewriting the file right after (temporary dirs, rolling checkpoints).
    staging = tempfile.mkdtemp(prefix="distcomp-artifact-")
    staged = os.path.join(staging, os.path.basename(os.path.normpath(local)) or "artifact")
    try:
        shutil.copytree(local, staged) if is_dir else shutil.copy2(local, staged)
    except OSError as exc:  # a full disk must not kill training: warn like a failed send
        shutil.rmtree(staging, ignore_errors=True)
        sender._fail("artifacts", exc)
        return
    sender.queue.put(_Artifact(staged, dest, is_dir, staging))


def log_artifact(local_path: PathArg, artifact_path: str | None = None) -> None:
    """Queue a file for the run's artifacts (under ``artifact_path``); it is copied now."""
    _log_artifact(local_path, artifact_path, is_dir=False)


def log_artifacts(local_dir: PathArg, artifact_path: str | None = None) -> None:
    """Queue a directory's contents for the run's artifacts; they are copied now."""
    _log_artifact(local_dir, artifact_path, is_dir=True)


def flush(timeout: float | None = None) -> bool:
    """Wait until everything queued so far was sent (or reported as failed); False on timeout."""
    if timeout is not None and timeout < 0:
        raise ValueError("timeout must be >= 0 or None")
    sender = _active()
    return True if sender is None or sender.pid != os.getpid() else sender.flush(timeout)
