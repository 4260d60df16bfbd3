"""The launcher's handle on per-node system-metrics monitors (``distcomp run --system-metrics``).

One ``python -m distcomp.tracking.monitor`` process per node samples CPU, memory, disk, network
(and GPU where MLflow finds one) into the job's single MLflow run as ``system/<node>/<metric>``.
They are separate processes, not threads, so sampling never competes with the launcher's
supervision loop for the GIL, and so a slow ``import mlflow`` never delays job start. This module
does not import mlflow: the launcher must stay fast when the feature is off.
"""

from __future__ import annotations

import os
import re
import signal
import site
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["NODE_ID", "MonitorProcess", "Monitors", "start_monitors"]

# A node id becomes one path segment of a metric name, so: MLflow's metric-name characters minus
# "/" (which would nest it) and spaces (which make names awkward to query). \Z, not $: see records.py.
NODE_ID = re.compile(r"^[A-Za-z0-9_.-]+\Z")
_KILL_WAIT = 2.0  # after SIGKILL the kernel reaps at once; this only guards against D-state hangs


@dataclass(frozen=True)
class MonitorProcess:
    node_id: str
    log_path: Path
    popen: subprocess.Popen[bytes]

    @property
    def pid(self) -> int:
        return self.popen.pid


@dataclass(frozen=True)
class Monitors:
    processes: tuple[MonitorProcess, ...]

    def stop(self, timeout: float = 10.0) -> list[str]:
        """Stop every monitor and return its problems, one line each, for the launcher to warn.

        SIGTERM lets a monitor log what it sampled since its last batch; ``timeout`` is shared by
        all of them (they stop in parallel), then stragglers get SIGKILL. Safe to call twice.
        """
        for p in self.processes:
            if p.popen.poll() is None:
                _signal(p.popen, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        killed: set[str] = set()
        for p in self.processes:
            try:
                p.popen.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                _signal(p.popen, signal.SIGKILL)
                killed.add(p.node_id)
                try:
                    p.popen.wait(_KILL_WAIT)
                except subprocess.TimeoutExpired:
                    pass
        problems = []
        for p in self.processes:
            rc = p.popen.returncode
            if p.node_id in killed:
                problems.append(f"monitor {p.node_id} did not stop within {timeout:g}s and was killed; "
                                f"its last samples are lost (log: {p.log_path})")
            elif rc is None:
                problems.append(f"monitor {p.node_id} (pid {p.pid}) could not be stopped (log: {p.log_path})")
            elif rc != 0:
                how = f"was killed by signal {-rc}" if rc < 0 else f"exited with code {rc}"
                problems.append(f"monitor {p.node_id} {how}: {_last_line(p.log_path)}")
        return problems


def start_monitors(run_id: str, tracking_uri: str, node_ids: Sequence[str], log_dir: Path,
                   interval: float | None = None) -> Monitors:
    """Start one monitor per node id, logging to ``log_dir/monitor-<node>.log``; returns at once.

    ``interval`` is the sampling period in seconds; None keeps MLflow's
    (``MLFLOW_SYSTEM_METRICS_SAMPLING_INTERVAL`` or 10 s). Raises ValueError for bad node ids and
    OSError when a monitor cannot be started (those already started are stopped first).
    """
    if not run_id:
        raise ValueError("run_id must not be empty")
    if interval is not None and not interval > 0:
        raise ValueError(f"interval must be > 0 seconds, got {interval!r}")
    for node in node_ids:
        if not isinstance(node, str) or not NODE_ID.match(node):
            raise ValueError(f"node id {node!r} must match {NODE_ID.pattern}")
    if len(set(node_ids)) != len(node_ids):
        raise ValueError(f"node ids must be unique, got {list(node_ids)}")

    log_dir.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "MLFLOW_RUN_ID": run_id, "MLFLOW_TRACKING_URI": tracking_uri}
    # The child must import this same distcomp even when the launcher runs from a source tree; but
    # never put a site-packages folder on PYTHONPATH, where it would shadow the standard library.
    package_root = Path(__file__).resolve().parents[2]
    if package_root not in {Path(p).resolve() for p in [*site.getsitepackages(), site.getusersitepackages()]}:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(package_root), env.get("PYTHONPATH")]))
    # --parent-pid, not the child's first getppid(): if the launcher died before the child looked,
    # the child would take its new parent (init) for the launcher and never notice.
    argv = [sys.executable, "-m", "distcomp.tracking.monitor", "--parent-pid", str(os.getpid())]
    if interval is not None:
        argv += ["--interval", repr(float(interval))]

    started: list[MonitorProcess] = []
    try:
        for node in node_ids:
            log_path = log_dir / f"monitor-{node}.log"
            with open(log_path, "wb") as log:
                popen = _spawn([*argv, "--node-id", node], env, log)
            started.append(MonitorProcess(node, log_path, popen))
    except OSError:
        Monitors(tuple(started)).stop(timeout=2.0)
        raise
    return Monitors(tuple(started))


def _spawn(argv: list[str], env: dict[str, str], log: object) -> subprocess.Popen[bytes]:
    # The child starts with SIGTERM/SIGINT blocked (the mask survives exec) and unblocks them once
    # its handlers are in place, so a stop() that comes right after start() (a job that failed at
    # once) is still handled, not fatal. Blocking here only defers the launcher's own Ctrl-C by the
    # time fork takes. pthread_sigmask is per thread, and the child inherits the calling thread's.
    blocked = {signal.SIGTERM, signal.SIGINT}
    old = signal.pthread_sigmask(signal.SIG_BLOCK, blocked)
    try:
        # Own session: Ctrl-C at the terminal reaches the launcher only, which then stops us.
        return subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=log,  # type: ignore[call-overload]
                                stderr=subprocess.STDOUT, start_new_session=True)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def _signal(popen: subprocess.Popen[bytes], sig: int) -> None:
    # By its own pid, never its group: its session holds nothing else worth signalling.
    try:
        popen.send_signal(sig)
    except ProcessLookupError:
        pass


def _last_line(path: Path) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(max(0, f.seek(0, os.SEEK_END) - 4096))
            lines = f.read().decode("utf-8", "replace").splitlines()
    except OSError as e:
        return f"(no log: {e})"
    return next((line.strip() for line in reversed(lines) if line.strip()), "(empty log)")
