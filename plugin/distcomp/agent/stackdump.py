"""A rank's stack dump for hang reports (``distcomp.agent.hang``), registered by distcomp's site
hooks at the rank's start: ``register()``. It is loaded by its path, not imported: the hooks run
before anything of distcomp is importable (a rank of an agent, a Ray worker without distcomp),
and it travels beside the agent's other files (Ray's package). Standard library only.
"""

import os


def register() -> None:
    """A job watched for hangs (``distcomp.agent.hang``): faulthandler writes every thread's stack
    to STACKS_DIR/rankN.stack on SIGUSR2 (SIGUSR1 is the preemption notice; no launcher uses
    USR2), after a header naming the rank, its pid, main thread and node: the supervisor signals
    only the pids a header names. One fd per rank, kept open for faulthandler, close-on-exec. A
    child that inherits the rank's variables (a Python subprocess) is not the rank and registers
    nothing; an exec of the rank (same pid) registers again. A handler the rank's code sets on
    SIGUSR2 later replaces this one. Both site hooks may call it (the agent's, then the MLflow one
    it hides): the first registers, once per interpreter."""
    folder = os.environ.get("DISTCOMP_STACKS_DIR", "")
    rank = next((os.environ[n] for n in ("RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "DISTCOMP_RANK")
                 if os.environ.get(n, "").isdigit()), "")  # distcomp.agent.progress.rank_name's
    owner, _, pid = os.environ.get("DISTCOMP_STACKS_RANK", "").partition(":")
    if not folder or not rank or (owner == rank and pid != str(os.getpid())):
        return
    import faulthandler

    if getattr(faulthandler, "_distcomp_rank", None) is not None:  # the other hook registered it already
        return
    fd = -1
    try:
        import signal
        import threading

        os.makedirs(folder, exist_ok=True)
        fd = os.open(os.path.join(folder, f"rank{rank}.stack"),
                     os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0), 0o644)
        main = threading.main_thread().ident or 0
        host = os.environ.get("DISTCOMP_STACKS_HOST") or os.uname().nodename  # the node's name: nodes may share a host
        head = f"distcomp stacks: rank{rank} pid {os.getpid()} main 0x{main:016x} host {host}\n"
        os.write(fd, head.encode())
        faulthandler.register(signal.SIGUSR2, file=fd, all_threads=True, chain=False)
        faulthandler._distcomp_rank = rank  # type: ignore[attr-defined]
        os.environ["DISTCOMP_STACKS_RANK"] = f"{rank}:{os.getpid()}"  # this rank's children are not it
        import atexit

        atexit.register(_leaving, fd)  # the first registered runs last: the rank's own code is done
    except (OSError, ValueError, RuntimeError):  # no stacks is no reason to fail a rank
        if fd >= 0:
            os.close(fd)


def _leaving(fd: int) -> None:
    """The rank's code is done and Python ends (finalizing may take a while): no hang."""
    try:
        os.write(fd, b"distcomp: exiting\n")
    except OSError:
        pass
