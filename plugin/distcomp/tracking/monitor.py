"""One node's system-metrics monitor: ``python -m distcomp.tracking.monitor --node-id NODE``.

Samples this node (``_nodestats``: /proc, and NVML for GPUs) every ``--interval`` seconds
into the run in ``MLFLOW_RUN_ID`` (store in ``MLFLOW_TRACKING_URI``) under MLflow's own names,
``system/<node>/<metric>``, as MLflow's SystemMetricsMonitor would, without importing mlflow
(``_sampling``). Prints ``ready`` once sampling has started. Stops on SIGTERM or SIGINT, or by itself once its parent is gone (a SIGKILLed launcher
must not leave it behind), after logging what it sampled. Exit codes: 0 stopped cleanly, 2 error
(one line on stderr, no traceback).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys

from ._monitors import NODE_ID

_PROG = "distcomp monitor"


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
    from ._sampling import Failure, sample_into_run

    if not NODE_ID.match(node_id):
        raise _Failure(f"--node-id {node_id!r} must match {NODE_ID.pattern}")
    if interval is not None and not interval > 0:
        raise _Failure(f"--interval must be > 0 seconds, got {interval}")
    every = interval or float(os.environ.get("MLFLOW_SYSTEM_METRICS_SAMPLING_INTERVAL") or 10)

    def say(line: str) -> None:
        print(f"{_PROG} {node_id}: {line}", file=sys.stderr, flush=True)

    try:
        return sample_into_run(node_id, every, parent, lambda: stop.signal, say)
    except Failure as e:
        raise _Failure(str(e)) from None


def _one_line(e: BaseException) -> str:
    text = " ".join(str(e).split())
    return text if len(text) <= 300 else text[:297] + "..."


if __name__ == "__main__":
    sys.exit(main())
