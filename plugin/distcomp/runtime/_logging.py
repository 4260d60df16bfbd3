"""Metrics, params and artifacts into the job's one MLflow run, from the main rank only.

`distcomp run` creates the run before the ranks start and hands each rank its id
(DISTCOMP_MLFLOW_RUN_ID, kept because ``mlflow.start_run()`` deletes MLFLOW_RUN_ID) and
MLFLOW_TRACKING_URI. Every call is validated on every rank, so a bug in the training script
fails all ranks alike; then, on the main rank only, it is queued with its timestamp and
returns. A daemon thread (``_sender``) sends what has piled up, and keeps what the store did
not take (a server away for a while) to send it again when it is back.
The queue is flushed by ``flush()``, at exit (an uncaught exception included) and on SIGTERM;
what could not be delivered by then is counted on stderr and reported to the launcher.
``os._exit()`` skips all of that: call ``finish()`` before it (it does what the exit does).
Other ranks, forked children (DataLoader workers) and processes without a run do nothing.
"""

from __future__ import annotations

import atexit
import operator
import os
import posixpath
import signal
import sys
import threading
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from . import _masking
from ._progress import beat as _beat, flush as _flush_beat
from ._rankinfo import rank_info
from ._records import Artifact, Metric, Param

if TYPE_CHECKING:
    from ..mlstore import Counts
    from ._sender import Sender

# MLflow's limits, from mlflow/utils/validation.py (mlflow 3.x); checked here without importing it.
MAX_ENTITY_KEY_LENGTH = 250
_NAME_PUNCTUATION = "_/.- :"  # besides alphanumerics: validate_param_and_metric_name, non-Windows

SIGTERM_FLUSH_S = 3.0  # the launcher sends SIGKILL ~5 s after SIGTERM; DISTCOMP_SIGTERM_FLUSH_S overrides
EXIT_FLUSH_S = 300.0  # a normal exit may wait for a big artifact or a server's return, not forever;
# DISTCOMP_EXIT_FLUSH_S overrides
NO_RUN_NOTICE = ("distcomp.runtime: no MLflow run (not started by `distcomp run`, or tracking is off): "
                 "metrics are not logged")

PathArg = str | os.PathLike[str]


# -- process state: resolved on first use, reset in forked children ------------------------

_lock = threading.Lock()
_resolved = False
_is_main = False
_sender: "Sender | None" = None
_params: dict[str, str] = {}  # logged so far: MLflow refuses a changed value, say so on every rank
_good_keys: set[str] = set()  # names already validated (training loops repeat a few keys)


def _env_run_id() -> str | None:
    if os.environ.get("DISTCOMP_TRACKING") == "off":
        return None
    return os.environ.get("DISTCOMP_MLFLOW_RUN_ID") or os.environ.get("MLFLOW_RUN_ID") or None


def _active() -> "Sender | None":
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
            from ._sender import Sender  # here: other ranks never pay for the sender and the store

            _sender = Sender(run, os.environ.get("MLFLOW_TRACKING_URI") or None)
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
    if sender is not None and sender.pid == os.getpid():
        sender.close(_seconds("DISTCOMP_EXIT_FLUSH_S", EXIT_FLUSH_S), "exit")


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


def _seconds(name: str, default: float) -> float:
    try:
        return max(0.0, float(os.environ.get(name, default)))
    except ValueError:
        return default


def _on_sigterm(signum: int, frame: object) -> None:
    sender = _sender
    if sender is not None and sender.pid == os.getpid():
        sender.close(_seconds("DISTCOMP_SIGTERM_FLUSH_S", SIGTERM_FLUSH_S), "SIGTERM")
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


def _param(key: object, value: object) -> Param | None:
    """The record to queue, or None when the same value was logged already."""
    k = _key(key, "param")
    v = _masking.text(str(value))  # what MLflow stores; a secret of the rank's environment masked
    old = _params.get(k)
    if old is not None and old != v:
        raise ValueError(f"param {k!r} was logged as {old!r}; MLflow refuses to change it to {v!r}")
    return None if old is not None else Param(k, v)


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
    _beat(s, values[0] if values else None)
    sender = _active()
    if sender is not None:
        ts = time.time_ns() // 1_000_000
        for k, v in values:
            sender.queue.put(Metric(k, v, ts, s))


def log_metric(key: str, value: float, step: int | None = None) -> None:
    """Queue one metric point, stamped now (ms)."""
    k = _key(key, "metric")
    record = Metric(k, _value(k, value), time.time_ns() // 1_000_000, _step(step))
    _beat(record.step, (record.key, record.value))
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
        sender.warn(f"artifacts:{type(exc).__name__}", f"could not copy {local!r} to log it: {exc}")
        return
    files = sum(len(names) for _root, _dirs, names in os.walk(staged)) if is_dir else 1
    sender.queue.put(Artifact(staged, dest, is_dir, staging, files))


def log_artifact(local_path: PathArg, artifact_path: str | None = None) -> None:
    """Queue a file for the run's artifacts (under ``artifact_path``); it is copied now."""
    _log_artifact(local_path, artifact_path, is_dir=False)


def log_artifacts(local_dir: PathArg, artifact_path: str | None = None) -> None:
    """Queue a directory's contents for the run's artifacts; they are copied now."""
    _log_artifact(local_dir, artifact_path, is_dir=True)


def flush(timeout: float | None = None) -> bool:
    """Send what is queued and what the store did not take earlier; True when everything this
    process logged so far is in the store.

    Without a timeout it returns once each batch was tried (a store that does not answer is not
    waited for: what it did not take is kept and sent again later); with one, it keeps trying
    until everything is delivered or the timeout passes. False means something is not in the
    store yet (or was refused, or dropped): ``undelivered()`` counts it. It never raises for a
    store's failure. The same happens at exit (up to 300 s, ``DISTCOMP_EXIT_FLUSH_S``) and on
    SIGTERM (3 s, ``DISTCOMP_SIGTERM_FLUSH_S``), which then say on stderr what was not logged.
    ``os._exit()`` skips every flush: call ``finish()`` first."""
    if timeout is not None and timeout < 0:
        raise ValueError("timeout must be >= 0 or None")
    sender = _active()
    return True if sender is None or sender.pid != os.getpid() else sender.flush(timeout)


def finish(timeout: float | None = None) -> bool:
    """End this process's logging, as its exit would: deliver what is queued, waiting up to
    ``timeout`` seconds (default ``DISTCOMP_EXIT_FLUSH_S``, 300) for a store that does not answer;
    say on stderr, and tell the launcher, what could not be delivered; stop the sending thread.
    For a script that ends with ``os._exit()``, which skips the exit's flush (torch's gloo
    threads outlive ``destroy_process_group()``, and an interpreter finalising beside them may
    abort). True when everything logged is in the store; what is logged after it is not sent
    (an exit counts it as lost). True at once on other ranks and without a run."""
    if timeout is not None and timeout < 0:
        raise ValueError("timeout must be >= 0 or None")
    _flush_beat()  # this rank's last step, as its exit would write it (every rank)
    sender = _active()
    if sender is None or sender.pid != os.getpid():
        return True
    limit = _seconds("DISTCOMP_EXIT_FLUSH_S", EXIT_FLUSH_S) if timeout is None else timeout
    return not sender.finish(limit).total


def undelivered() -> "Counts":
    """What this process logged that is not in the store (kept to send again, refused, or
    dropped), as ``Counts(metrics, params, artifacts)``; all 0 on other ranks and without a run."""
    from ..mlstore import Counts

    sender = _active()
    return Counts() if sender is None or sender.pid != os.getpid() else sender.undelivered()
