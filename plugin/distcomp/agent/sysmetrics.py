"""The node agent's system-metrics sampler: one ``python -m distcomp.tracking.monitor`` child per
node, which logs this node's CPU, memory, disk, network (and GPUs, with nvidia-ml-py) into the
job's one MLflow run as ``system/<node>/<metric>``. Standard library only, like the whole agent.

The record's ``system_metrics`` entry (``{"interval": S}``, written by the target from the Plan)
asks for it; the job's env must name an MLflow run (``MLFLOW_RUN_ID``): an untracked job samples
nothing. The sampler is a separate process, so the ranks' code is untouched and sampling never
competes with the supervision loop for the GIL. Where it cannot run (no distcomp or MLflow in
the image, an unreachable store) the agent says so in one line and the job runs anyway.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

__all__ = ["ENTRY", "LOGS", "NODE_ENV", "Sampler", "entry", "interval_of", "node_env", "node_id", "start", "until_ended", "waits"]

ENTRY = "system_metrics"  # the record's key
NODE_ENV = "DISTCOMP_SYSTEM_METRICS_NODE"  # in the agent's env: its node's name in the metrics, over its host's
MODULE = "distcomp.tracking.monitor"
LOGS = "monitors"  # in the job folder: each node's monitor log, NODE.log
_NODE_ID = re.compile(r"[^A-Za-z0-9_.-]+")  # tracking._monitors.NODE_ID's complement: one metric path segment
_STOP_WAIT = 10.0  # the monitor logs its last samples on SIGTERM; a store that slow loses them
_KILL_WAIT = 2.0


def entry(interval: float | None, shared: bool = False) -> dict[str, Any]:
    """The record's fields for a Plan's ``system_metrics_interval`` (None: off, no entry);
    ``shared``: every node sees the job folder's ``exits/`` (Slurm), so a node with no replica of
    its own (mpirun's ranks reach it by themselves) samples until every replica has ended."""
    if interval is None:
        return {}
    return {ENTRY: {"interval": float(interval), **({"shared_exits": True} if shared else {})}}


def waits(record: Mapping[str, Any]) -> bool:
    """Whether a node with no replica of its own samples while the job's replicas run (``entry``'s ``shared``)."""
    spec = record.get(ENTRY)
    return interval_of(record) is not None and isinstance(spec, dict) and spec.get("shared_exits") is True


def until_ended(exits: str, names: Sequence[str], poll: float = 0.5) -> None:
    """Return once every replica in ``names`` has reported its end (``exits/NAME.json``), or a
    SIGTERM or SIGINT came (the platform ends the node's task: srun, scancel)."""
    stopped: list[int] = []
    previous = {sig: signal.signal(sig, lambda signum, _frame: stopped.append(signum))
                for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        while not stopped and not all(os.path.exists(os.path.join(exits, f"{n}.json")) for n in names):
            threading.Event().wait(poll)  # a signal's handler runs between two waits
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def interval_of(record: Mapping[str, Any]) -> float | None:
    """The sampling interval a record asks for, None when it asks for none (or asks wrongly:
    an agent newer than its writer must still run the job)."""
    spec = record.get(ENTRY)
    value = spec.get("interval") if isinstance(spec, dict) else None
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
        return float(value)
    return None


def node_id(name: str) -> str:
    """``name`` (a host name, a Slurm node name) as one segment of a metric name."""
    return _NODE_ID.sub("-", name).strip("-") or "node"


def node_env(names: Sequence[str], index: int) -> dict[str, str]:
    """What tells node ``index``'s agent its metrics' name (``NODE_ENV``), where the platform's
    name of each node (a Ray node's address) is ``names``: that name, or ``NAME-node<index>``
    where several of the job's nodes share it (nodes of one machine)."""
    name = node_id(names[index])
    return {NODE_ENV: name if [node_id(n) for n in names].count(name) == 1 else f"{name}-node{index}"}


@dataclass
class Sampler:
    """A started monitor; ``stop`` ends it (SIGTERM, a wait, SIGKILL) and says what went wrong."""

    node: str
    popen: subprocess.Popen[bytes]
    log_path: str
    say: Callable[[str], None]
    stopping: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        threading.Thread(target=self._watch, name="distcomp-sysmetrics", daemon=True).start()

    def _watch(self) -> None:
        """One line when the monitor ends by itself: this node's metrics stop there."""
        code = self.popen.wait()
        if not self.stopping.is_set():
            self.say(f"system metrics of {self.node} stopped (monitor exited with code {code}): "
                     f"{_last_line(self.log_path)}; the job runs on")

    def stop(self, timeout: float = _STOP_WAIT) -> None:
        self.stopping.set()
        if self.popen.poll() is None:
            _signal(self.popen, signal.SIGTERM)
        try:
            self.popen.wait(timeout)
            return
        except subprocess.TimeoutExpired:
            _signal(self.popen, signal.SIGKILL)
        try:
            self.popen.wait(_KILL_WAIT)
        except subprocess.TimeoutExpired:
            pass
        self.say(f"system metrics of {self.node}: the monitor did not stop within {timeout:g} s and was killed; "
                 "its last samples are lost")


def start(record: Mapping[str, Any], env: Mapping[str, str], host: str, log_dir: str,
          say: Callable[[str], None]) -> Sampler | None:
    """The monitor of this node (named ``node_id`` of ``env[NODE_ENV]``, else of ``host``),
    started with the ranks' ``env`` (the MLflow run's variables), its output in
    ``log_dir/NODE.log``; None where the record asks for none, the job is not tracked, or it
    cannot start (said in one line). Returns at once: it never delays the ranks."""
    interval = interval_of(record)
    if interval is None:
        return None
    if not env.get("MLFLOW_RUN_ID", "").strip() or env.get("DISTCOMP_TRACKING") == "off":
        return None  # untracked: nothing to log into
    node = node_id(env.get(NODE_ENV) or host)
    argv = [sys.executable, "-m", MODULE, "--node-id", node, "--interval", repr(interval),
            "--parent-pid", str(os.getpid())]
    child = {**env, "MLFLOW_SYSTEM_METRICS_NODE_ID": node}
    # the record's interval, not an inherited one; and no rank's hooks: distcomp's MLflow hook acts
    # where the job's run is in DISTCOMP_MLFLOW_RUN_ID, and a process that has a progress folder beats
    for name in ("MLFLOW_SYSTEM_METRICS_SAMPLING_INTERVAL", "DISTCOMP_MLFLOW_RUN_ID", "DISTCOMP_PROGRESS_DIR"):
        child.pop(name, None)
    # the monitor's handlers are not there yet: SIGTERM/SIGINT blocked until it unblocks them
    # (tracking.monitor), so a job that ends at once still stops it cleanly; own session: a
    # terminal's Ctrl-C reaches the agent, which stops it
    blocked = {signal.SIGTERM, signal.SIGINT}
    old = signal.pthread_sigmask(signal.SIG_BLOCK, blocked)
    log_path = os.path.join(log_dir, f"{node}.log")
    try:
        os.makedirs(log_dir, mode=0o700, exist_ok=True)  # what it says may hold the store's address
        with open(log_path, "ab") as log:
            popen = subprocess.Popen(argv, env=child, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
    except OSError as exc:
        say(f"system metrics off on {node}: cannot start {sys.executable} ({exc.strerror or exc}); the job runs on")
        return None
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
    return Sampler(node, popen, log_path, say)


def _signal(popen: subprocess.Popen[bytes], sig: int) -> None:
    try:  # by its own pid: its session holds nothing else
        popen.send_signal(sig)
    except ProcessLookupError:
        pass


def _last_line(path: str) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(max(0, f.seek(0, os.SEEK_END) - 4096))
            lines = f.read().decode("utf-8", "replace").splitlines()
    except OSError as exc:
        return f"(no log: {exc.strerror or exc})"
    return next((line.strip() for line in reversed(lines) if line.strip()), "(empty log)")
