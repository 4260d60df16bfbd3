"""The monitor's loop: sample this node (``_nodestats``) every interval and log the sample
into the job's run under ``system/<node>/``, through distcomp's own store client (``mlstore``:
SQLite or a server's REST API written directly), never ``import mlflow``. So a monitor starts
in a tenth of a second and costs a few milliseconds of CPU per sample: cheap enough to be on
for every tracked job (benchmarks/system_metrics.py).

A sample the store did not take (it is away for a while) is kept and sent with the next one,
up to ``KEEP`` samples; what is dropped beyond that is counted and said at the end.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from typing import Callable

from ..errors import JobError
from ._nodestats import Sampler, prefix
from ..mlstore import Metric, StoreUnavailable, TrackingError, open_store
from ..mlstore._store import within

__all__ = ["KEEP", "Failure", "sample_into_run"]

KEEP = 360  # samples held while the store is away: an hour at the default 10 s
_POLL = 0.2  # seconds between looks at the stop flag and the parent: bounds the stop's latency
_BATCH = 1000  # metric points per store call: MLflow's log_batch limit
_QUICK_S = 5.0  # a store that does not answer within this is away: the next sample tries again
_LAST_S = 2.0  # at the stop, what a store that is away gets: the job's end must not wait on it


class Failure(JobError):
    """An expected error: one line on stderr, exit code 2."""


def sample_into_run(node_id: str, interval: float, parent: int, stopped: Callable[[], int | None],
                    say: Callable[[str], None]) -> int:
    """Sample every ``interval`` s until ``stopped()`` names a signal or ``parent`` is gone; then one
    last sample (a job shorter than one interval still has a point) and a last try to deliver."""
    run_id = os.environ.get("MLFLOW_RUN_ID", "").strip()
    if not run_id:
        raise Failure("MLFLOW_RUN_ID is not set: the launcher sets it to the job's MLflow run")
    uri = os.environ.get("MLFLOW_TRACKING_URI", "").strip()
    try:
        store = within(open_store(uri), _QUICK_S) if uri else None
    except TrackingError as exc:
        raise Failure(f"MLFLOW_TRACKING_URI {uri!r}: {exc}") from None
    if store is None:
        raise Failure("MLFLOW_TRACKING_URI is not set: the launcher sets it to the job's store")
    try:
        store.get_run(run_id)  # a wrong run or a dead store: said at once, not after the first interval
    except (StoreUnavailable, TrackingError) as exc:
        raise Failure(f"cannot read run {run_id} from {store.uri}: {exc}") from None
    sampler, name = Sampler(), prefix(node_id)
    if sampler.gpu_problem and os.environ.get("CUDA_VISIBLE_DEVICES", "") not in ("", "-1"):
        say(sampler.gpu_problem)  # only where GPUs are expected: a CPU node needs no word
    print("ready", flush=True)
    held: list[list[Metric]] = []  # samples not delivered yet, oldest first
    dropped, step, due = 0, 0, time.monotonic() + interval
    while True:
        last = stopped() is not None or os.getppid() != parent
        if not last and time.monotonic() < due:
            time.sleep(_POLL)
            continue
        now = int(time.time() * 1000)
        held.append([Metric(name + key, value, now, step) for key, value in sampler.sample().items()])
        step, due = step + 1, max(due + interval, time.monotonic())
        if last:
            store = within(store, _LAST_S)
        try:
            while held:  # oldest first, at most one log_batch's worth of points a call
                batch = 1
                while batch < len(held) and sum(map(len, held[:batch + 1])) <= _BATCH:
                    batch += 1
                store.log(run_id, {}, metrics=[m for sample in held[:batch] for m in sample])
                del held[:batch]
        except StoreUnavailable as exc:
            if last:
                say(f"{sum(map(len, held))} points not logged: the store did not answer ({exc})")
        except TrackingError as exc:  # refused: these points never will be taken
            say(f"{sum(map(len, held))} points refused by the store: {exc}")
            held = []
        while len(held) > KEEP:
            dropped += len(held.pop(0))
        if last:
            break
    if dropped:
        say(f"{dropped} points dropped while the store was away (more than {KEEP} samples)")
    why = "parent process is gone" if stopped() is None else f"got {signal.Signals(stopped() or 0).name}"
    print(f"distcomp monitor {node_id}: {why}; stopped after {step} samples", file=sys.stderr, flush=True)
    return 0
