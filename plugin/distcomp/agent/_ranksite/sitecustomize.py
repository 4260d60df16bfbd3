"""distcomp's rank watcher inside a Python rank (``distcomp.agent.rankwatch`` puts this folder
first on the rank's PYTHONPATH).

A Python MPI rank that fails (an uncaught exception, ``sys.exit(3)``) does not end at once:
mpi4py calls ``MPI_Finalize`` as Python exits, which waits for every other rank there, so
neither mpirun nor the watcher outside sees the failure until the others end. Python's own
``atexit`` handlers run before mpi4py's (a C-level one): this module's reports the failure from
there, as the watcher outside would, and the supervisor stops the job. Then it runs the
``sitecustomize`` this one hides, if the environment has one.

Every Python process under the rank inherits this PYTHONPATH, but only the rank may speak for
itself: a Python child that fails (``git describe``'s kind, whose code the rank reads and goes
on) or a forked child is not the rank. The rank is the process the watcher started (its pid in
``DISTCOMP_RANK_PID``; an ``exec`` keeps it), or, where that is a wrapper (a shell script, ``uv
run``), the process under it that joined MPI; never a fork (its pid is not the one this module
started in).

A job watched for hangs (``distcomp.agent.hang``) puts this folder first on every rank's
PYTHONPATH too: here the rank registers its stack dump on SIGUSR2 (``_stacks``).
"""

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
_failed: "list[int]" = []  # the exit code this process is ending with, once it is known to be a failure
_PID = os.getpid()  # a forked child has another pid, and is not the rank whatever it holds
_STARTED = os.environ.get("DISTCOMP_RANK_PID") == str(_PID)  # the process the watcher started (rankwatch.RANK_PID)


def _excepthook(kind: object, value: object, tb: object, _hook: object = sys.excepthook) -> object:
    _failed.append(1)  # Python calls it for an uncaught exception, then exits 1
    return _hook(kind, value, tb)  # type: ignore[operator]


def _exit(status: object = None, _real: object = sys.exit) -> None:
    code = 0 if status is None else status if isinstance(status, int) else 1
    _failed.append(code)  # an int 0 is a success; text is printed and exits 1, as Python does
    _real(status)  # type: ignore[operator]


def _joined_mpi() -> bool:
    """Whether this process initialized MPI itself (mpi4py): the rank under a wrapper."""
    mpi = sys.modules.get("mpi4py.MPI")
    try:
        return bool(mpi is not None and mpi.Is_initialized())
    except Exception:  # an exit handler must not fail: not known to be the rank, then
        return False


def _is_rank() -> bool:
    return os.getpid() == _PID and (_STARTED or _joined_mpi())


def _at_exit() -> None:
    folder = os.environ.get("DISTCOMP_RANK_EXITS")
    if not folder or not _failed or _failed[-1] == 0 or not _is_rank():
        return
    import json
    import socket
    import time

    rank = next((os.environ[n] for n in ("OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK")
                 if os.environ.get(n, "").isdigit()), "")
    if not rank:
        return
    path = os.path.join(folder, f"rank{rank}.json")
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump({"rank": int(rank), "pid": os.getpid(), "host": socket.gethostname(),
                       "exit_code": _failed[-1], "signal": None, "ended": time.time()}, f)
        os.replace(tmp, path)
    except OSError:
        pass


def _chain() -> None:
    """Run the sitecustomize this module hides (distcomp's MLflow hook, a virtualenv's): as
    distcomp.runtime's own does; a copy, as each is loaded alone, under the name sitecustomize."""
    finder = next((f for f in sys.meta_path if getattr(f, "__name__", "") == "PathFinder"), None)
    # off the path (it holds only this module), so the one chained to cannot find this one again
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]
    spec = finder.find_spec("sitecustomize", sys.path) if finder is not None else None
    if spec is None or spec.loader is None:
        return
    import importlib.util

    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)


def _stacks(*places: str) -> None:
    """A job watched for hangs: the rank's stack dump (``distcomp.agent.stackdump``, loaded by its
    path from the first of ``places`` that holds it)."""
    if not os.environ.get("DISTCOMP_STACKS_DIR"):
        return
    import importlib.util

    for place in places:
        path = os.path.join(_HERE, place, "stackdump.py")
        spec = importlib.util.spec_from_file_location("_distcomp_stackdump", path) if os.path.isfile(path) else None
        if spec is not None and spec.loader is not None:
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            module.register()
            return


_stacks("..")
if os.environ.get("DISTCOMP_RANK_EXITS"):
    import atexit

    sys.excepthook = _excepthook
    sys.exit = _exit  # type: ignore[assignment]
    atexit.register(_at_exit)  # the first registered runs last, still before mpi4py's MPI_Finalize
_chain()
