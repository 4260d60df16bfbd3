"""A rank's watcher: ``python rankwatch.py PROGRAM ARGS...`` runs one rank and reports its failure.

``mpirun`` waits for every rank before it ends a job in which one failed (a rank that exits 1
after ``MPI_Finalize``, or before its peers notice, leaves the others running for as long as they
run). Open MPI starts each rank through an exec agent when one is named
(``PRTE_MCA_odls_base_exec_agent``; Open MPI 4: ``OMPI_MCA_orte_fork_agent``), so distcomp names
this file there: it runs the rank as its child and, when the rank ends by itself with a non-zero
code or a signal, writes ``rankN.json`` into ``$DISTCOMP_RANK_EXITS``. The supervisor (the local
target's, or the node agent's) looks there while the job runs and stops the whole job at once.

A Python rank reports a failure itself, from ``_ranksite/sitecustomize.py`` (this watcher puts it
on the rank's PYTHONPATH): mpi4py's ``MPI_Finalize`` at exit waits for the other ranks, so a
failed Python rank would not end before them; Python's own exit handlers run before it. Every
Python process under the rank inherits that PYTHONPATH, so the rank's pid goes in ``RANK_PID``:
only the rank itself reports, not a ``git describe``-like Python child whose failure the rank
reads and survives, nor a forked child (see ``_ranksite``).

Signals for the rank (mpirun's SIGTERM, SIGINT, SIGUSR1...) come to this process: they are passed
on to the rank's process group, and a rank that ends after one was stopped, not failed. If this
process is killed outright, the kernel kills the rank too (``PR_SET_PDEATHSIG``). Standard
library only: it travels with the node agent.
"""

from __future__ import annotations

import os
import signal
import sys

TYPE_CHECKING = False  # typing costs every rank's start milliseconds; mypy reads this name as True
if TYPE_CHECKING:
    from typing import Any, Mapping, Sequence

ENV = "DISTCOMP_RANK_EXITS"  # the folder reports go to
RANK_PID = "DISTCOMP_RANK_PID"  # the pid of the process this watcher started: the rank (_ranksite reads it)
# the Open MPI settings that put a program in front of every rank (5: PRRTE's; 4: ORTE's)
EXEC_AGENT = ("PRTE_MCA_odls_base_exec_agent", "OMPI_MCA_orte_fork_agent")
_RANK_ENV = ("OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK")
_PASSED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2,
           signal.SIGCONT, signal.SIGTSTP)
_STOPS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT)


def hook_env(names: Sequence[str], folder: str, environ: Mapping[str, str]) -> dict[str, str]:
    """What a replica whose wrapper names ``names`` (``Replica.rank_hooks``) needs for its ranks to
    be watched: each name set to this watcher, unless the user set one (theirs runs instead:
    nothing is watched), and ``ENV``. Empty where a path holds a space (Open MPI splits the value
    on spaces and honours no quotes): the job still runs, ended by mpirun alone."""
    command = [sys.executable, "-I", "-S", os.path.abspath(__file__)]  # no site: it starts in ~10 ms
    if not names or any(n in environ for n in names) or any(c.isspace() for w in command for c in w):
        return {}
    return {**{n: " ".join(command) for n in names}, ENV: folder}


def clear(folder: str) -> None:
    """An empty report folder for a new attempt (an earlier attempt's reports are not this one's)."""
    os.makedirs(folder, exist_ok=True)
    for name in os.listdir(folder):
        try:
            os.unlink(os.path.join(folder, name))
        except OSError:
            pass


def first_failure(folder: str, zero_or_greater: bool = False) -> dict[str, Any] | None:
    """The earliest report in ``folder`` of a rank that failed by itself, or None."""
    import json

    try:
        names = [n for n in os.listdir(folder) if n.endswith(".json")]
    except OSError:
        return None
    found = []
    for name in names:
        try:
            with open(os.path.join(folder, name), encoding="utf-8") as f:
                data = json.load(f)
        except (OSError, ValueError):
            continue  # half-written reports are renamed into place: this one is not a report
        if not isinstance(data, dict) or not isinstance(data.get("rank"), int):
            continue
        code, sig = data.get("exit_code"), data.get("signal")
        if sig or (isinstance(code, int) and (code != 0 if not zero_or_greater else False)):
            found.append(data)
    return min(found, key=lambda d: (float(d.get("ended") or 0), str(d.get("rank")))) if found else None


def describe(report: Mapping[str, Any]) -> str:
    """``rank 1 exited with code 3`` / ``rank 1 was killed by signal 9``, as the watcher saw it."""
    how = (f"was killed by signal {report['signal']}" if report.get("signal")
           else f"exited with code {report.get('exit_code')}")
    return f"rank {report.get('rank')} {how} (seen by distcomp's rank watcher, which stopped the job at once)"


def blame(report: Mapping[str, Any]) -> tuple[int, int | None, str, int | None]:
    """A report as ``distcomp.records.RankFailure``'s fields: rank, exit code (negative: the signal),
    what happened, the rank's pid."""
    code = -int(report["signal"]) if report.get("signal") else report.get("exit_code")
    return int(report["rank"]), code, describe(report), report.get("pid")


def _report(folder: str, rank: str, pid: int, code: int) -> None:
    import json
    import socket
    import time

    data = {"rank": int(rank) if rank.isdigit() else rank, "pid": pid, "host": socket.gethostname(),
            "exit_code": code if code >= 0 else None, "signal": -code if code < 0 else None, "ended": time.time()}
    path = os.path.join(folder, f"rank{rank}.json")
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        os.makedirs(folder, exist_ok=True)
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(data, f)
        os.replace(tmp, path)  # whole, or not at all: the supervisor never reads half of it
    except OSError as exc:  # the job still ends, when mpirun sees it: say why it was not at once
        print(f"distcomp rank watcher: cannot report rank {rank}'s end in {folder}: {exc.strerror or exc}",
              file=sys.stderr, flush=True)


def _start(args: Sequence[str]) -> int:
    """The rank, forked and exec'd: in a process group of its own (signals reach it once, from
    here, with its own children), killed if this watcher is (Linux)."""
    pid = os.fork()
    if pid:
        return pid
    try:
        os.setpgid(0, 0)
        try:
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass
        for sig in _PASSED:
            signal.signal(sig, signal.SIG_DFL)
        os.environ[RANK_PID] = str(os.getpid())  # exec keeps the pid: this process is the rank
        os.execvp(args[0], list(args))
    except OSError as exc:
        print(f"distcomp rank watcher: cannot start {args[0]!r}: {exc.strerror or exc}", file=sys.stderr, flush=True)
    os._exit(127)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args:
        print("usage: rankwatch.py PROGRAM [ARGS...]  (Open MPI's exec agent: it runs one rank)", file=sys.stderr)
        return 2
    folder = os.environ.get(ENV, "")
    if not folder:  # nobody to report to: be the rank
        os.execvp(args[0], args)
    # a Python rank reports its own failure before mpi4py's MPI_Finalize waits for the others
    site = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_ranksite")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (site, os.environ.get("PYTHONPATH")) if p)
    stopped: list[int] = []
    child: list[int] = []

    def passed(signum: int, frame: object) -> None:
        if signum in _STOPS:
            stopped.append(signum)
        if child:
            try:
                os.killpg(child[0], signum)
            except (ProcessLookupError, PermissionError):
                pass

    for sig in _PASSED:
        signal.signal(sig, passed)
    child.append(_start(args))
    if stopped:  # a signal came while it started
        passed(stopped[-1], None)
    code = os.waitstatus_to_exitcode(os.waitpid(child[0], 0)[1])  # a signal's handler runs, then it waits on
    rank = next((os.environ[n] for n in _RANK_ENV if os.environ.get(n, "").isdigit()), str(os.getpid()))
    if code != 0 and not stopped and not os.path.exists(os.path.join(folder, f"rank{rank}.json")):
        _report(folder, rank, child[0], code)  # unless the rank said it first
    if code < 0:  # end as the rank did, so mpirun says the same
        for sig in _PASSED:
            signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
        return 128 - code
    return code


if __name__ == "__main__":
    raise SystemExit(main())
