"""The daemon thread that empties the logging queue into the job's MLflow run.

It sends batches through ``distcomp.tracking``'s stores (a SQLite database or an MLflow server
written directly, as the launcher does: no seconds-long ``import mlflow`` competing with
training; other stores through MLflow's client). A batch the store did not take (it did not
answer, or said "try later") is kept in a backlog, in memory then on disk, and sent again with
MLflow's backoff, first in first out, until it is taken or the process ends; a batch the store
refused is counted and warned about. At the end the process waits for a store that is away only
``EXIT_OUTAGE_S``: what it still holds then is moved into a pending file in the run folder
(``RUN_DIR/tracking``), which the launcher, or later ``distcomp status|reap RUN_DIR``, delivers
once the store answers. Everything is counted, so the process can say at its end what waits and
what never reached the store: on stderr, and in a report for the launcher.
"""

from __future__ import annotations

import os
import queue
import shutil
import sys
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any

from ..mlstore import (REPORTS_ENV, Counts, Metric as StoreMetric, Report, Retry, StoreUnavailable, TrackingError,
                        describe_loss, open_store, resolve_uri, write_report)
from ..mlstore._delivery import describe_waiting
from ..mlstore._pending import artifact_files
from ._backlog import Backlog, Item, counts
from ._records import Artifact, Flush, Metric, Param, Record

BATCH_POINTS = 1000  # metric points per item sent or kept: one log_batch call's worth (MLflow's limit)
RETRY_CAP_S = 30.0  # a rank retries a kept batch at least this often: the data should follow the server's return
DRAIN_STEP_S = 1.0  # while a flush waits with a deadline, how often the store is tried
IN_FLIGHT_S = 1.0  # at the end, how long the thread may take to stop: a send under way is then counted as what it became
EXIT_OUTAGE_S = 10.0  # at the end, how long a store that does not answer is waited for: the rest waits on disk


class Sender:
    """The queue of one logging process and the thread that sends it."""

    def __init__(self, run_id: str, tracking_uri: str | None) -> None:
        self.run_id, self.tracking_uri, self.pid = run_id, tracking_uri, os.getpid()
        self.queue: queue.SimpleQueue[Record] = queue.SimpleQueue()  # put() is safe in signal handlers
        self.folder = os.environ.get(REPORTS_ENV) or None
        self.backlog = Backlog(self.folder)
        self._warned: set[str] = set()
        try:
            self.retry = Retry.from_env(os.environ)
        except TrackingError as exc:  # a bad MLFLOW_HTTP_* value must not stop training
            self.retry = Retry()
            self.warn("retry", f"{exc}; using MLflow's defaults")
        # the books: what was taken off the queue and is not delivered yet, what the store took,
        # what it refused; changed under _books, so the end's account is exact
        self._books = threading.RLock()  # re-entrant: a SIGTERM may come while the main thread holds it
        self.pending = self.delivered = self.refused = Counts()
        self._unsent = Counts()  # still queued when the thread stopped
        self._waiting = Counts()  # moved into a pending file at the end, for distcomp to deliver
        self._pending_files: list[str] = []
        self._sealed = False  # close() moved the backlog into the run folder: nothing more is kept
        self._flying: Item | None = None  # being sent, not from the backlog (a slow send at the end)
        self._holding: deque[Item | Flush] = deque()  # taken off the queue, batched, not sent yet
        self._reported: tuple[Counts, Counts] = (Counts(), Counts())  # (lost, waiting) last reported
        self.closed = False  # the process is ending: the thread takes and sends nothing more
        self._stopped = threading.Event()  # the thread saw ``closed`` and holds nothing uncounted
        self._store: Any = None  # a distcomp.tracking Store, opened by the thread
        self._run: Any = None  # its RunRef, for artifacts
        self._failures = 0  # consecutive tries the store did not answer
        self._down_since: float | None = None  # when the first of them began
        self._patience: float | None = None  # at the end: how long a store that is away is waited for
        self._retry_at = 0.0
        self.last_error = ""
        self.thread = threading.Thread(target=self._loop, name="distcomp-mlflow", daemon=True)
        self.thread.start()

    # -- the caller's side ---------------------------------------------------------------------
    def flush(self, timeout: float | None) -> bool:
        """True once everything queued so far is in the store; see ``distcomp.runtime.flush``."""
        if not self.thread.is_alive():
            return self.queue.empty() and self.complete()
        done = threading.Event()
        self.queue.put(Flush(done, None if timeout is None else time.monotonic() + timeout))
        return done.wait(timeout) and self.complete()

    def complete(self) -> bool:
        """Nothing kept for later, nothing refused or dropped."""
        return not len(self.backlog) and not self.refused.total

    def undelivered(self) -> Counts:
        """Kept for later, refused or dropped so far (what is queued or in flight is not counted)."""
        return self.backlog.kept + self.refused

    def close(self, limit: float, reason: str) -> Counts:
        """The process ends: deliver what can be delivered in ``limit`` seconds; if anything is
        left, stop the thread, count it, say it on stderr and leave a report for the launcher.
        Returns what was lost. Called again (a second exit hook), it counts what came since."""
        if not self.closed:
            self._patience = _seconds("DISTCOMP_EXIT_OUTAGE_S", EXIT_OUTAGE_S)
            if self.flush(limit):
                return Counts()
        with self._books:
            self.closed = True  # from here no send starts: the account below stays true
        self.queue.put(Flush(threading.Event()))  # wakes the thread if it waits for work
        self._stopped.wait(IN_FLIGHT_S)  # a send under way (a SQLite write: milliseconds) ends and is counted
        with self._books:
            unsent: list[Record] = []
            while True:
                try:
                    unsent.append(self.queue.get_nowait())
                except queue.Empty:
                    break
            self._unsent += sum((_record_counts(r) for r in unsent), Counts())
            self._spill(unsent)
            lost = self.pending + self.refused + self._unsent
            logged = self.delivered + lost + self._waiting
            waiting = self._waiting
        self.backlog.discard()
        if (lost.total or waiting.total) and (lost, waiting) != self._reported:
            self._reported = (lost, waiting)
            self._report(Report(self.run_id, self.pid, reason, logged, lost, self.last_error, waiting))
        return lost

    def _spill(self, unsent: list[Record]) -> None:
        """Under ``_books``, closed: what is held and what is still queued goes into a pending
        file in the run folder, and counts as waiting, not lost (no folder: it is lost)."""
        flying = self._flying  # may still land: then stored twice, and MLflow keeps one of each point
        taken = ([flying] if flying is not None else []) + [i for i in self._holding if not isinstance(i, Flush)]
        for waiter in self._holding:
            if isinstance(waiter, Flush):
                waiter.done.set()
        self._holding.clear()
        queued = _items(unsent)
        items = taken + queued
        self._sealed = True
        if not self.folder or not (len(self.backlog) or items):
            return
        try:
            path, held = self.backlog.spill(items)
        except OSError as exc:  # a full disk: counted as lost below
            self.warn("spill", f"could not keep what MLflow did not take in {self.folder}: {exc.strerror or exc}")
            return
        self._pending_files.append(path)
        self._waiting += held
        unsent_n = sum((counts(i) for i in queued), Counts())
        self.pending -= held - unsent_n  # the backlog, what the thread held; the rest was counted as unsent
        self._unsent -= unsent_n

    def finish(self, limit: float) -> Counts:
        """The script ends its logging (``distcomp.runtime.finish``): as ``close``, then the thread
        is stopped and joined, so a process that leaves by ``os._exit()`` leaves nothing in flight."""
        lost = self.close(limit, "finish")
        with self._books:
            self.closed = True  # after a complete flush close() left the thread waiting for more
        if self.thread.is_alive():
            self.queue.put(Flush(threading.Event()))  # wakes it; it sees ``closed`` and returns
            self.thread.join(IN_FLIGHT_S)
        return lost

    def _report(self, report: Report) -> None:
        where = ""
        if self.folder:
            try:
                where = f"; see {write_report(Path(self.folder), report)}"
            except OSError as exc:
                where = f"; could not write the report in {self.folder}: {exc.strerror or exc}"
        cause = f" (the store said: {report.error})" if report.error else ""
        said = [describe_loss(report.logged, report.undelivered)] if report.undelivered.total else []
        if report.waiting.total:
            said.append(f"{describe_waiting(report.waiting)} wait in {', '.join(self._pending_files)} (MLflow did not "
                        "take them in time); distcomp delivers them once the store answers")
        self.warn("end", f"at {report.reason}: {'; '.join(said)}{cause}{where}", once=False)

    def warn(self, kind: str, message: str, once: bool = True) -> None:
        """On stderr; once per kind of problem: a rank that logs every step must not flood it."""
        if once and kind in self._warned:
            return
        self._warned.add(kind)
        try:
            where = self.tracking_uri or "the default store"
            more = "; further errors of this kind are not shown" if once else ""
            sys.stderr.write(f"distcomp.runtime: {message} (MLflow run {self.run_id} at {where}{more})\n")
            sys.stderr.flush()
        except (OSError, ValueError):  # stderr closed at shutdown
            pass

    def _fail(self, what: str, exc: BaseException) -> None:
        text = (str(exc).strip().splitlines() or [""])[0][:300]
        self.warn(f"{what}:{type(exc).__name__}", f"could not log {what}: {type(exc).__name__}: {text}")

    # -- the thread ----------------------------------------------------------------------------
    def _loop(self) -> None:
        while not self._stop_if_closed():
            wait = max(0.0, self._retry_at - time.monotonic()) if len(self.backlog) else None
            try:
                first: Record | None = self.queue.get(timeout=wait)
            except queue.Empty:
                first = None
            with self._books:  # what is taken is counted before close() can look
                records = [] if first is None else [first]
                while True:  # take whatever piled up meanwhile: that is the batching
                    try:
                        records.append(self.queue.get_nowait())
                    except queue.Empty:
                        break
                for r in records:
                    self.pending += _record_counts(r)
                if self._stop_if_closed():
                    return
            try:
                self._handle(records)
                if len(self.backlog) and time.monotonic() >= self._retry_at:
                    self._drain(None)
            except BaseException as exc:  # noqa: BLE001 - never let the thread die: flush() would wait in vain
                if self._stop_if_closed():
                    return
                self._fail("records", exc)
                for r in records:
                    if isinstance(r, Flush):
                        r.done.set()

    def _stop_if_closed(self) -> bool:
        with self._books:
            if self.closed:
                self._stopped.set()
            return self.closed

    def _handle(self, records: list[Record]) -> None:
        """Send in order: params and metrics in batches; an artifact or a flush waits for
        everything queued before it."""
        steps: list[Item | Flush] = []
        params: dict[str, str] = {}
        metrics: list[Metric] = []
        for r in records:
            if isinstance(r, Metric):
                metrics.append(r)
                continue
            if isinstance(r, Param):
                params[r.key] = r.value
                continue
            steps += _batches(params, metrics)
            params, metrics = {}, []
            steps.append(r)
        steps += _batches(params, metrics)
        with self._books:  # what is held here is close()'s to keep, should a send hold this thread
            self._holding = deque(steps)
        while True:
            with self._books:
                if not self._holding:
                    return
                step = self._holding.popleft()
            if isinstance(step, Flush):
                self._drain(step.until)
                step.done.set()
            else:
                self._submit(step)

    def _submit(self, item: Item) -> None:
        if len(self.backlog):  # the store is away: first in, first out
            self._keep(item)
            return
        self._flying = item
        try:
            sent = self._attempt(item)
        finally:
            self._flying = None
        if not sent:
            self._keep(item)
            self._schedule()

    def _keep(self, item: Item) -> None:
        with self._books:  # not while close() moves the backlog into the run folder
            if self._sealed:  # close() has moved it already and counted this as lost (pending)
                return
            kept = self.backlog.add(item)
            if not kept:  # counted as refused: it will never be sent
                self.pending -= counts(item)
                self.refused += counts(item)
        if not kept:
            self._done_with(item)
            self.warn("backlog-full", f"{self.backlog.dropped.total:,} or more records were dropped: the backlog "
                                      "of what MLflow has not taken yet is full (or the disk is)")

    def _drain(self, until: float | None) -> None:
        """Send the backlog, first in first out; keep trying until ``until`` if given."""
        while True:
            with self._books:
                item = self.backlog.peek() if len(self.backlog) and not self.closed else None
            if item is None:
                return
            if self._attempt(item):
                with self._books:
                    if not self.closed:  # else close() has moved the backlog meanwhile
                        self.backlog.pop()
                continue
            self._schedule()
            left = (until - time.monotonic()) if until is not None else 0.0
            patience, since = self._patience, self._down_since
            if patience is not None and since is not None:  # the process ends: wait so long, no longer
                left = min(left, since + patience - time.monotonic())
            if left <= 0 or self.closed:
                return
            time.sleep(min(DRAIN_STEP_S, left))

    def _schedule(self) -> None:
        self._failures += 1
        self._retry_at = time.monotonic() + min(self.retry.delay(self._failures), RETRY_CAP_S)

    def _attempt(self, item: Item) -> bool:
        """Send one item: True when the store took it or refused it for good (counted), False
        when it did not answer (the item is still pending)."""
        size = counts(item)
        with self._books:
            if self.closed:
                return False
        taken = refused = False
        began = time.monotonic()
        try:
            self._send(item)
            taken = True
        except StoreUnavailable as exc:
            if self._down_since is None:
                self._down_since = began
            self.last_error = (str(exc).splitlines() or [""])[0][:300]
            self.warn("unavailable", f"MLflow did not take what was logged ({self.last_error}); keeping it and "
                                     "trying again (distcomp.runtime.flush() returns False until it is delivered)")
        except Exception as exc:  # noqa: BLE001 - a refusal, a bad URI, no mlflow: warn, count, never crash
            self._fail(_kind(item), exc)
            refused = True
        finally:
            with self._books:
                if not self._sealed:  # else close() has counted it (waiting on disk, or lost): that is final
                    if taken or refused:
                        self.pending -= size
                    if taken:
                        self.delivered += size
                    elif refused:
                        self.refused += size
        if taken:
            self._failures = 0
            self._down_since = None
        if taken or refused:
            self._done_with(item)
        return taken or refused

    def _done_with(self, item: Item) -> None:
        if isinstance(item, Artifact):
            shutil.rmtree(item.staging_dir, ignore_errors=True)

    def _connect(self) -> Any:
        """The store, opened on first send; a rank tries each request briefly and keeps what
        failed rather than hold this thread for minutes."""
        if self._store is None:
            uri = self.tracking_uri or resolve_uri(os.environ, Path.cwd())
            self._store = open_store(uri, os.environ, self.retry.brief())
        return self._store

    def _send(self, item: Item) -> None:
        store = self._connect()
        if isinstance(item, dict):
            for problem in store.log(self.run_id, {}, item):
                self.warn("params:changed", problem)
        elif isinstance(item, Artifact):
            self._send_artifact(store, item)
        else:
            store.log(self.run_id, {}, metrics=[StoreMetric(m.key, m.value, m.timestamp, m.step) for m in item])

    def _send_artifact(self, store: Any, a: Artifact) -> None:
        if self._run is None:
            self._run = store.get_run(self.run_id)
        store.upload(self._run, artifact_files(a.staged, a.artifact_path, a.is_dir))


def _kind(item: Item) -> str:
    return "artifacts" if isinstance(item, Artifact) else "params" if isinstance(item, dict) else "metrics"


def _batches(params: dict[str, str], metrics: list[Metric]) -> list[Item]:
    """Params apart from metrics (a param that changed value must not cost any metric), metrics
    in batches of ``BATCH_POINTS``."""
    batches: list[Item] = [params] if params else []
    return batches + [metrics[i:i + BATCH_POINTS] for i in range(0, len(metrics), BATCH_POINTS)]


def _items(records: list[Record]) -> list[Item]:
    """Queued records as the items a backlog holds: params and metrics in batches, in order."""
    items: list[Item] = []
    for r in records:
        if isinstance(r, Metric):
            if items and isinstance(items[-1], list) and len(items[-1]) < BATCH_POINTS:
                items[-1].append(r)
            else:
                items.append([r])
        elif isinstance(r, Param):
            if items and isinstance(items[-1], dict) and r.key not in items[-1]:
                items[-1][r.key] = r.value
            else:
                items.append({r.key: r.value})
        elif isinstance(r, Artifact):
            items.append(r)
    return items


def _seconds(name: str, default: float) -> float:
    try:
        return max(0.0, float(os.environ.get(name, default)))
    except ValueError:
        return default


def _record_counts(record: Record) -> Counts:
    if isinstance(record, Metric):
        return Counts(metrics=1)
    if isinstance(record, Param):
        return Counts(params=1)
    if isinstance(record, Artifact):
        return Counts(artifacts=record.files)
    return Counts()
