"""Close what a dead supervisor left behind: ``distcomp reap`` and the watchdog's last act.

A status.json saying ``running`` belongs to a live job while its run folder's lock is held
(by the supervisor or its watchdog), or while its supervisor still runs: same host, same pid
with the same start time (a reused pid has another), same boot. Otherwise the supervisor
died: every process still carrying the job's cookie, and every process in the job's cgroup
where it had one (``_cgroup``: one that cleared its environment too), is stopped (SIGTERM, grace, SIGKILL),
and so is an orphan the job's watchdog noted (``ADOPTED``) under the job's own signature: a note
anyone else wrote, or a line of it changed, names no process to stop,
status.json becomes ``failed`` saying so, the outputs keep their incomplete markers, and the
job's MLflow run is marked FAILED with the reason as ``distcomp.failure``. A job of another
host is reported, not touched (its processes are out of reach), unless ``force``.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from . import _cgroup, _partial, _procs, _status
from ._claim import ADOPTED, LOCK_NAME, REAP_RECORD, describe_holder, holder, lock

Outcome = Literal["closed", "running", "elsewhere", "ended"]
STATUS = ("succeeded", "failed", "timed_out", "cancelled", "interrupted")  # final states of status.json (interrupted: older versions)


@dataclass(frozen=True)
class Reaped:
    """What ``reap`` found in one run folder and did about it."""

    run_dir: Path
    outcome: Outcome
    message: str
    problems: tuple[str, ...] = ()  # what could not be done (an MLflow store out of reach)


def supervisor_alive(sup: dict[str, Any]) -> bool:
    """The supervisor recorded in a status.json still runs here (not a zombie, not a reused pid)."""
    pid = sup.get("pid")
    if not isinstance(pid, int) or not _procs.alive(pid):
        return False
    if sup.get("boot_id") and _procs.boot_id() and sup["boot_id"] != _procs.boot_id():
        return False
    return sup.get("start_time") is None or _procs.start_time(pid) in (None, sup["start_time"])


def job_cgroup(status: dict[str, Any], cookie: str) -> str | None:
    """The job's cgroup as status.json names it, if it is one distcomp made for this cookie
    (a status.json edited to name another cgroup is not obeyed)."""
    path = status.get("cgroup")
    if not isinstance(path, str) or not cookie or os.path.basename(path) != f"distcomp-{cookie[:16]}":
        return None
    return path


def note_key(run_dir: Path) -> str | None:
    """The key that signs the watchdog's ADOPTED note: in the job's reap record (mode 600, this
    user's: ``jobrecord.read_record`` refuses any other), while the job has not ended well."""
    from ...core.jobrecord import RecordError, read_record

    try:
        record = read_record(run_dir / REAP_RECORD)
    except RecordError:
        return None
    key = record.options.get("note_key") if record.action == "reap" else None
    return key if isinstance(key, str) and key else None


def adopted(run_dir: Path, key: str | None) -> set[int]:
    """The supervisor's children its watchdog noted (``ADOPTED``) that still run as the same
    process (same start time): with their descendants, they are the job's. Only a line signed with
    the job's note ``key`` counts: the note is a file in the run folder, and whoever could write
    it would otherwise choose which of this user's processes a reap kills."""
    if not key:
        return set()
    try:
        lines = (run_dir / ADOPTED).read_text(encoding="ascii").splitlines()
    except (OSError, ValueError):
        return set()
    import hmac

    found = set()
    for line in lines:
        pid, start, mac = (line.split(" ") + ["", ""])[:3]
        signed = hmac.new(key.encode(), f"{pid} {start}".encode(), "sha256").hexdigest()
        if (pid.isdigit() and start.isdigit() and hmac.compare_digest(mac, signed)
                and _procs.start_time(int(pid)) == int(start)):
            found.add(int(pid))
    return found


def stop_job(cookie: str, cgroup: str | None, grace: float, run_dir: Path | None = None,
             key: str | None = None) -> tuple[int, set[int]]:
    """Stop every process of a job whose supervisor is gone: by its cookie, its cgroup (then
    removed), what its watchdog noted the supervisor adopted (in ``run_dir``, signed with ``key``),
    and descent; returns how many there were and the pids that would not die."""
    def find() -> set[int]:
        held = _cgroup.members(cgroup) | (adopted(run_dir, key) if run_dir is not None else set())
        return (_procs.job_processes(cookie, held) if cookie or held else set()) | held

    n = _procs.stop(find, grace)
    left = _cgroup.kill(cgroup)
    if cgroup and not left:
        _cgroup.remove(cgroup)
    left |= {pid for pid in find() if _procs.alive(pid)}
    if run_dir is not None and not left:
        try:
            (run_dir / ADOPTED).unlink()
        except OSError:
            pass
    return n, left


def stopped(how: str, n: int, left: set[int], cgroup: str | None) -> str:
    """What ``stop_job`` did, in words for status.json and the MLflow run."""
    if left:
        return (f"{how} could not stop {len(left)} of the job's {n} process(es) still running "
                f"(pid {', '.join(map(str, sorted(left)))})")
    said = f"{how} stopped every rank ({n} process(es) were still running)"
    if cgroup is None:  # then such a process is found only among the orphans the watchdog noted
        said += ("; the job had no cgroup: a process that cleared its environment and left the ranks' "
                 "process tree is found only if its watchdog saw the supervisor adopt it")
    return said


def job_left(status: dict[str, Any], run_dir: Path) -> bool:
    """Whether any process of the job still runs here (by its cookie, cgroup or adoption)."""
    cookie = str(status.get("cookie") or "")
    return bool(_cgroup.members(job_cgroup(status, cookie)) or adopted(run_dir, note_key(run_dir))
                or (cookie and _procs.job_processes(cookie)))


def reap(run_dir: Path, grace: float = 5.0, force: bool = False, lock_fd: int | None = None,
         cookie: str | None = None, cancel: bool = False, key: str | None = None) -> Reaped:
    """Close ``run_dir``'s job if its supervisor is gone. ``lock_fd``, ``cookie`` and ``key`` are
    the watchdog's: it holds the folder's lock already and knows its supervisor died (``key``
    signs its ADOPTED note; else it is read from the job's reap record). ``cancel``:
    ``distcomp cancel`` of such a job, which ends it ``cancelled`` (its MLflow run KILLED)."""
    fd = -1
    try:
        if lock_fd is None and (run_dir / LOCK_NAME).exists():
            try:
                fd, held = lock(run_dir / LOCK_NAME, create=False)
            except OSError:  # not ours to lock (another user's folder): the supervisor's pid still tells
                held = True
            if not held:
                info = holder(os.pread(fd, 4096, 0).decode("utf-8", "replace"))
                return Reaped(run_dir, "running", f"{describe_holder(info)}: left alone")
        return _reap(run_dir, grace, force, lock_fd is not None, cookie, cancel, key)
    finally:
        if fd >= 0:
            os.close(fd)


def _reap(run_dir: Path, grace: float, force: bool, watchdog: bool, cookie: str | None,
          cancel: bool = False, key: str | None = None) -> Reaped:
    status = _status.read(run_dir / _status.NAME) or {}
    key = key or note_key(run_dir)
    state = status.get("state")
    ours = cookie is None or status.get("cookie") == cookie
    cookie = cookie or str(status.get("cookie") or "")
    cgroup = job_cgroup(status, cookie) if ours else None
    if state != "running" or not ours:  # ended (or, for a watchdog, never started): only leftovers
        n = stop_job(cookie, cgroup, grace, run_dir, key)[0] if watchdog and cookie else 0
        if not ours:
            said = "the job had not started: nothing to do"
        else:
            said = f"already ended ({state}): nothing to do" if status else "no readable status.json: nothing to do"
        said += f"; stopped {n} process(es) it left" if n else ""
        if watchdog and ours and state in STATUS:  # died between its final record and ending the MLflow run
            ended, problems = _close_mlflow(status, run_dir, str(status.get("message") or ""), state)
            if ended:
                return Reaped(run_dir, "closed", f"the supervisor died after the job {state}; {ended}", tuple(problems))
        if ours and state in STATUS and not watchdog:  # its MLflow run's end may wait in the folder for the store
            later = deliver_waiting(run_dir)
            if later is not None:
                held, problems = later
                return Reaped(run_dir, "ended" if held == "RUNNING" else "closed",
                              f"already ended ({state}); " + (f"delivered what waited for MLflow: MLflow run "
                                                              f"{_run_id(status)}: {held}" if held != "RUNNING" else
                                                              "its MLflow run's end still waits for the store"),
                              tuple(problems))
        return Reaped(run_dir, "ended", said)
    found = status.get("supervisor")
    sup: dict[str, Any] = found if isinstance(found, dict) else {}
    pid, host, here = sup.get("pid"), sup.get("host"), socket.gethostname()
    job = status.get("job_id", "?")
    if host != here and not force:
        return Reaped(run_dir, "elsewhere", f"job {job} runs on host {host} (pid {pid}): it cannot be checked from "
                      f"{here}; run distcomp reap on {host}, or give --force to mark it failed from here")
    if not watchdog and host == here and supervisor_alive(sup):
        return Reaped(run_dir, "running", f"job {job} is running (pid {pid} on host {host}): left alone")
    problems = []
    if host == here:
        n, left = stop_job(cookie, cgroup, grace, run_dir, key)
        how = "its watchdog" if watchdog else "distcomp cancel" if cancel else "distcomp reap"
        message = f"the supervisor (pid {pid} on host {host}) died; " + stopped(how, n, left, cgroup)
        if left:
            problems.append(f"{run_dir}: process(es) {', '.join(map(str, sorted(left)))} of job {job} still run")
    else:
        message = (f"the supervisor (pid {pid} on host {host}) was marked failed from {here} with --force; "
                   f"its processes on {host}, if any, were not stopped")
    started = status.get("started_at")
    final = "cancelled" if cancel else "failed"
    if cancel:
        message = f"cancelled: {message}"
    status.update(state=final, exit_code=143 if cancel else 1, message=message,
                  wall_s=round(_status.now() - started, 3) if isinstance(started, (int, float)) else 0.0,
                  reaped={"by": "watchdog" if watchdog else "distcomp cancel" if cancel else "distcomp reap",
                          "pid": os.getpid(), "host": here, "at": _status.now()})
    try:
        _status.write(run_dir / _status.NAME, status)
    except OSError as exc:
        problems.append(f"{run_dir / _status.NAME}: could not be rewritten: {exc.strerror or exc}")
    markers = status.get("incomplete_outputs")
    if isinstance(markers, dict):
        _partial.mark({k: str(v) for k, v in markers.items()},
                      f"incomplete: job {job} {final}: {message}\nsee {run_dir / _status.NAME}. "
                      "Removed when a job writing here succeeds.\n")
    said, more = _close_mlflow(status, run_dir, message, final)
    return Reaped(run_dir, "closed", message + (f"; status.json: {final}" if not problems else "")
                  + (f"; {said}" if said else ""), tuple(problems + more))


def deliver_waiting(run_dir: Path) -> tuple[str, list[str]] | None:
    """An ended job whose MLflow run's end, and the points its ranks could not deliver, wait in
    the run folder for a store that did not answer: delivered now if the store answers; (the
    status the store holds, problems), or None when nothing waits."""
    from ...tracking import deliver_later

    return deliver_later(run_dir)


def _run_id(status: dict[str, Any]) -> str:
    found = status.get("mlflow")
    return str(found.get("run_id") or "?") if isinstance(found, dict) else "?"


def _close_mlflow(status: dict[str, Any], run_dir: Path, message: str, state: str) -> tuple[str, list[str]]:
    """End the job's MLflow run as ``state`` (failed: FAILED with the reason as ``distcomp.failure``),
    with the rank logs, as far as they got, as its artifacts: the core's ``settle``, as every
    job's run ends (once: under the job's record where this machine submitted it, else unless its
    ``distcomp.state`` tag says someone ended it)."""
    found = status.get("mlflow")
    ml: dict[str, Any] = found if isinstance(found, dict) else {}
    run_id, uri = ml.get("run_id"), ml.get("tracking_uri")
    if not run_id or not uri:
        return "", []
    from ...core.plugins import get_plugin_manager
    from ...core.submission import settle
    from ...records import JobOutcome, JobState, TrackingRef
    from ._job import end_tags, job_id, restarts_of

    heard: list[str] = []
    ref = TrackingRef(str(run_id), str(uri), str(ml.get("experiment_id") or ""))
    outcome = JobOutcome(job_id(run_dir), JobState.parse(state), status.get("exit_code"), message=message,
                         tracking=ref, end_tags=end_tags(status), restarts=restarts_of(status))
    settle(job_id(run_dir), get_plugin_manager().target("local").make(), outcome, None, heard.append)
    said = [line for line in heard if not line.startswith("warning: ")]
    problems = [line.removeprefix("warning: ") for line in heard if line.startswith("warning: ")]
    return "; ".join(said), problems
