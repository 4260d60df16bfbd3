"""Places distcomp never writes, replaces or deletes, whatever the command and whatever
``--force`` says: ``/``, a system folder or a place inside the system's own trees, your home
folder itself, a component registry or anything in it, and the code folder or a folder holding
it. Core, below the jobs, the function exports and the CLI, so every writer asks the same rule
(``distcomp.core.jobs.place_problem`` for a job's run folder and outputs, ``distcomp.core.owned`` for
what ``--force`` may replace)."""

from __future__ import annotations

import errno
import os
from functools import cache
from pathlib import Path

__all__ = ["SYSTEM_FOLDERS", "SYSTEM_TREES", "USER_PLACES", "in_registry", "protected", "resolved", "system_problem"]

# Folders nothing of distcomp's may be written into as a whole: these themselves...
SYSTEM_FOLDERS = ("/", "/bin", "/boot", "/dev", "/dev/shm", "/etc", "/home", "/lib", "/lib32", "/lib64", "/libx32",
                  "/media", "/mnt", "/opt", "/proc", "/root", "/run", "/sbin", "/srv", "/sys", "/tmp", "/usr",
                  "/usr/local", "/var", "/var/tmp")
# ...and everything under these, but for the places users keep their own files there.
SYSTEM_TREES = ("/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/proc", "/sbin", "/sys",
                "/usr")
USER_PLACES = ("/dev/shm", "/usr/local")


@cache
def _system() -> tuple[frozenset[Path], tuple[Path, ...], tuple[Path, ...]]:
    """The system folders as this machine resolves them (``/lib`` is ``/usr/lib`` on merged-/usr)."""
    def real(paths: tuple[str, ...]) -> tuple[Path, ...]:
        return tuple(dict.fromkeys(Path(os.path.realpath(p)) for p in paths))
    return frozenset(real(SYSTEM_FOLDERS)), real(SYSTEM_TREES), real(USER_PLACES)


def system_problem(real: Path) -> str | None:
    """Why the resolved path ``real`` is the system's or your home folder itself, or None."""
    exact, trees, user = _system()
    home = os.environ.get("HOME")
    if home and real == Path(os.path.realpath(home)):
        return "is your home folder"
    if real in exact:
        return "is a system folder"
    if any(real.is_relative_to(u) for u in user):
        return None
    root = next((t for t in trees if real.is_relative_to(t)), None)
    return f"is inside the system folder {root}" if root else None


class _Loop(OSError):
    """A path whose symbolic links lead back to themselves."""


def resolved(path: "str | os.PathLike[str]") -> Path:
    """``path`` absolute, every symbolic link followed; OSError for a loop (``spec.resolve_path``'s
    rule, here without the spec: the core's lowest writers ask it too)."""
    try:
        out = Path(os.path.abspath(path)).resolve()
    except RuntimeError:  # Python before 3.13 raises this for a loop
        raise _Loop(errno.ELOOP, "a symbolic link loop", str(path)) from None
    try:
        os.stat(out)
    except OSError as exc:  # a missing path is fine: it is what a new output is
        if exc.errno == errno.ELOOP:
            raise _Loop(errno.ELOOP, "a symbolic link loop", str(path)) from None
    return out


def in_registry(path: Path) -> Path | None:
    """The component registry ``path`` lies in (links resolved), or None."""
    from .stores import inside_store

    try:
        return inside_store(path)
    except (OSError, ValueError):  # a NUL byte, a link loop: ``protected`` says so
        return None


def protected(path: Path, code: Path | None = None) -> str | None:
    """Why distcomp must never write, replace or delete ``path``, or None: a NUL byte, a symbolic
    link loop, a system folder (or inside the system's trees), your home folder itself, a
    component registry or anything in it, the code folder ``code`` or a folder holding it."""
    if "\0" in str(path):
        return "holds a NUL byte (\\0)"
    try:
        real = resolved(path)
        given = Path(path) if os.path.isabs(path) else Path(os.path.abspath(path))
        shown = "" if real == given else f" ({real})"  # a link or a ``..`` followed: say where
        why = system_problem(real)
        if why:
            return why + shown
        store = in_registry(path)
        if store is not None:
            return f"is inside the component registry at {store}"
        if code is not None:
            code = code.resolve()
            if real == code:
                return f"is the code folder{shown}"
            if code.is_relative_to(real):
                return f"holds the code folder {code}{shown}"
    except _Loop:
        return "is a symbolic link loop"
    except OSError as exc:  # a name too long, a folder that cannot be read, ...
        return f"is not a usable path ({exc.strerror or exc})"
    return None
