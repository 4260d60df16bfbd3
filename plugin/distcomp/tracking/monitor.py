"""One node's system-metrics monitor: ``python -m distcomp.tracking.monitor --node-id NODE``.

Runs MLflow's own SystemMetricsMonitor against the run in ``MLFLOW_RUN_ID`` (store in
``MLFLOW_TRACKING_URI``), so this node's CPU, memory, disk, network and, where MLflow finds one,
GPU metrics land in the job's run as ``system/<node>/<metric>``. Prints ``ready`` once sampling has
started. Stops on SIGTERM or SIGINT, or by itself once its parent is gone (a SIGKILLed launcher
must not leave it behind), after logging what it sampled. Exit codes: 0 stopped cleanly, 2 error
(one line on stderr, no traceback).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

from ._monitors import NODE_ID

_POLL = 0.2  # seconds between looks at the stop flag and the parent; cheap, and bounds stop latency
_PROG = "distcomp monitor"
_QUICK_HTTP = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "1", "MLFLOW_HTTP_REQUEST_TIMEOUT": "10"}


class _Failure(Exception):
    """An expected error: reported as one line on stderr, exit code 2."""


class _Stop:
    """Set from a signal handler. A plain flag, not threading.Event: Event.set() takes a lock the
    interrupted main thread may already hold inside Event.wait(), and would deadlock."""

    def __init__(self) -> None:
        self.signal: int | None = None

    def handle(self, signum: int, frame: object) -> None:
        self.signal = signum


def main(argv: list[str] | None = None) -> int:
    stop = _Stop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, stop.handle)
    # The launcher starts us with both blocked (see _monitors._spawn): a stop that came during
    # interpreter start-up is pending and is delivered to the handler now.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGINT})

    parser = argparse.ArgumentParser(prog="python -m distcomp.tracking.monitor",
                                     description="Log this node's system metrics to an MLflow run.")
    parser.add_argument("--node-id", required=True, help="names the metrics: system/<node-id>/<metric>")
    parser.add_argument("--interval", type=float, default=None,
                        help="seconds between samples (default: MLFLOW_SYSTEM_METRICS_SAMPLING_INTERVAL or 10)")
    parser.add_argument("--parent-pid", type=int, default=None,
                        help="stop once this process is no longer our parent (default: the parent at start)")
    args = parser.parse_args(argv)
    parent = args.parent_pid if args.parent_pid is not None else os.getppid()
    try:
        return _monitor(args.node_id, args.interval, parent, stop)
    except _Failure as e:
        print(f"{_PROG} {args.node_id}: {e}", file=sys.stderr, flush=True)
        return 2
    except Exception as e:  # noqa: BLE001 -- an unforeseen error still gets one line, not a traceback
        print(f"{_PROG} {args.node_id}: unexpected {type(e).__name__}: {_one_line(e)}", file=sys.stderr, flush=True)
        return 2


def _monitor(node_id: str, interval: float | None, parent: int, stop: _Stop) -> int:
    run_id = os.environ.get("MLFLOW_RUN_ID", "").strip()
    if not run_id:
        raise _Failure("MLFLOW_RUN_ID is not set: the launcher sets it to the job's MLflow run")
    if not NODE_ID.match(node_id):
        raise _Failure(f"--node-id {node_id!r} must match {NODE_ID.pattern}")
    if interval is not None and not interval > 0:
        raise _Failure(f"--interval must be > 0 seconds, got {interval}")
    # MLflow lets these variables beat its constructor's arguments; an inherited
    # MLFLOW_SYSTEM_METRICS_NODE_ID would give every node the same name.
    os.environ["MLFLOW_SYSTEM_METRICS_NODE_ID"] = node_id
    if interval is not None:
        os.environ["MLFLOW_SYSTEM_METRICS_SAMPLING_INTERVAL"] = repr(interval)

    try:
        import psutil

        # psutil.cpu_percent() measures since its previous call, and MLflow's first sample would
        # otherwise be the first call, a meaningless 0.0: start that window now, before the slow
        # mlflow import.
        psutil.cpu_percent()
        from mlflow.system_metrics.system_metrics_monitor import SystemMetricsMonitor
        from mlflow.tracking import MlflowClient
    except ImportError as e:
        raise _Failure(f"mlflow is not importable ({_one_line(e)}); install distcomp[mlflow]") from None

    tracking_uri = os.environ.get("MLFLOW_TRACKING_URI") or None
    client = MlflowClient(tracking_uri)
    # SystemMetricsMonitor does not look at the run until its first interval is over; look now, so
    # a wrong run id or an unreachable store is an error at once, not a silent warning later.
    try:
        with _quick_http():
            run = client.get_run(run_id)
    except Exception as e:  # noqa: BLE001 -- MlflowException, requests, SQLAlchemy... all mean the same here
        raise _Failure(f"cannot read run {run_id} from {client.tracking_uri}: {_one_line(e)}") from None
    if run.info.lifecycle_stage != "active":
        raise _Failure(f"run {run_id} is {run.info.lifecycle_stage}")

    # samples_before_logging=1: each sample is logged at the end of its interval, not averaged into
    # batches (MLFLOW_SYSTEM_METRICS_SAMPLES_BEFORE_LOGGING, if set, still wins: MLflow's rule).
    monitor = SystemMetricsMonitor(run_id, sampling_interval=interval or 10, samples_before_logging=1,
                                   node_id=node_id, tracking_uri=client.tracking_uri)
    monitor.start()
    # MLflow keeps its sampler thread in a private attribute; without it we rely on signals and
    # the parent check alone, which is all that stopping needs.
    sampler = getattr(monitor, "_process", None)
    if not isinstance(sampler, threading.Thread):
        sampler = None
    print("ready", flush=True)

    while stop.signal is None and os.getppid() == parent and (sampler is None or sampler.is_alive()):
        time.sleep(_POLL)
    by_itself = stop.signal is None and os.getppid() == parent

    monitor.finish()  # joins the sampler and flushes its queue (MLflow swallows a failed flush)
    # The sampler drops the sample of an interval that a stop cut short, so a job shorter than one
    # interval would log nothing: take a last sample and log all that is pending, checked this time.
    try:
        monitor.collect_metrics()
        monitor.publish_metrics(monitor.aggregate_metrics())
        monitor.mlflow_logger.flush()
    except Exception as e:  # noqa: BLE001 -- whatever the store raised, these samples are lost
        raise _Failure(f"could not log system metrics to run {run_id}: {_one_line(e)}") from None

    if by_itself:
        # The sampler ends by itself when the run is no longer RUNNING (fine) or when reading or
        # logging to the store failed (MLflow logged a warning above; say so, this node is blind).
        status = _status(client, run_id)
        if status == "RUNNING" or status is None:
            raise _Failure("MLflow's sampler stopped early (see its warning above); "
                           "no more system metrics from this node")
        print(f"{_PROG} {node_id}: run {run_id} is {status}; stopped", file=sys.stderr, flush=True)
    else:
        why = "parent process is gone" if stop.signal is None else f"got {signal.Signals(stop.signal).name}"
        print(f"{_PROG} {node_id}: {why}; stopped", file=sys.stderr, flush=True)
    return 0


@contextlib.contextmanager
def _quick_http() -> Iterator[None]:
    """Fail fast on an unreachable server: MLflow's default HTTP retries take ~4 minutes to give up,
    and a monitor stuck that long ignores stop() until it is SIGKILLed. MLflow reads these
    variables on each request; the user's own settings win."""
    added = {k: v for k, v in _QUICK_HTTP.items() if k not in os.environ}
    os.environ.update(added)
    try:
        yield
    finally:
        for k in added:
            os.environ.pop(k, None)


def _status(client: Any, run_id: str) -> str | None:
    try:
        return str(client.get_run(run_id).info.status)
    except Exception:  # noqa: BLE001 -- unreadable counts as unknown
        return None


def _one_line(e: BaseException) -> str:
    text = " ".join(str(e).split())
    return text if len(text) <= 300 else text[:297] + "..."


if __name__ == "__main__":
    sys.exit(main())
