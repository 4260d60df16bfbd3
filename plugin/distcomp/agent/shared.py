"""What the node agent and the rest of distcomp share: the placeholders and their binding, the
masking rule, and writing a file whole. One module both import, so the agent (standard library
only: it travels alone to a pod, an srun task, a Ray worker) and the core never drift apart.

It imports only the standard library (``tests/agent/test_shared.py`` holds it to that), and
nothing of distcomp: the core imports it, never the other way round.
"""

from __future__ import annotations

import os
import re
from typing import Callable, Iterable, Mapping

__all__ = ["COMMAND", "MIN_LEN", "PLACEHOLDER", "REDACTED", "bind", "fsync_dir", "mask_pattern", "write_atomic"]

# {{kind}} or {{kind:arg}}; kinds are fixed so a stray "{{" in user text is never bound.
PLACEHOLDER = re.compile(r"\{\{(host|node|port|job_dir|job_id|restart|max_restarts|command)(?::([A-Za-z0-9_.-]+))?\}\}")
COMMAND = "{{command}}"  # a whole argv item: the component's rendered command goes here


def bind(text: str, values: Mapping[str, str], error: Callable[[str], Exception] = KeyError) -> str:
    """``text`` with each placeholder replaced from ``values`` (keys ``host:0``, ``job_dir``...);
    a placeholder with no value raises ``error(message)`` (each side its own kind of error)."""
    def one(m: "re.Match[str]") -> str:
        key = m.group(1) + (f":{m.group(2)}" if m.group(2) is not None else "")
        if key not in values:
            raise error(f"no value for placeholder {m.group(0)}")
        return values[key]
    return PLACEHOLDER.sub(one, text)


# The masking rule (``distcomp.base.redact`` says why and which forms of a secret are needles).
REDACTED = "***"
MIN_LEN = 3  # shorter texts are masked only as words of their own: everywhere would blank unrelated text
_BEFORE = r"(?<![^\s='\"])"  # a short secret starts the text, or follows a space, '=' or a quote
_AFTER = r"(?![^\s'\"])"  # ... and ends the text, or a space or a quote follows


def mask_pattern(needles: Iterable[str]) -> "tuple[tuple[str, ...], re.Pattern[str] | None]":
    """The needles, each once and longest first (an empty one dropped: it would match everywhere),
    and the one pattern that finds them all (None: nothing to mask). ``pattern.sub(REDACTED, text)``
    masks a text."""
    ordered = tuple(sorted({n for n in needles if n}, key=lambda n: (-len(n), n)))
    parts = [re.escape(n) if len(n) >= MIN_LEN else _BEFORE + re.escape(n) + _AFTER for n in ordered]
    return ordered, (re.compile("|".join(parts)) if parts else None)


def write_atomic(path: "str | os.PathLike[str]", text: "str | bytes", durable: bool = False,
                 mode: "int | None" = None) -> None:
    """Write ``text`` (UTF-8; or bytes as they are) to ``path`` through a temporary sibling, so a reader (or a crash) never
    sees half a file and a previous version stays until the new one is complete. The sibling's
    name is this writer's own (pid and a random part): two writers of one file (a supervisor and
    its watchdog, two publishers) never write into each other's. ``durable``: fsync the file and
    its folder, so the new content survives a power cut (the registry's metadata). ``mode``: the
    file's permissions from its creation on (0o600: never readable by others, not even a moment)."""
    folder, name = os.path.split(os.fspath(path))
    folder = folder or "."
    tmp = os.path.join(folder, f".{name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    try:
        os.makedirs(folder, exist_ok=True)
        data = text.encode("utf-8") if isinstance(text, str) else text
        if mode is None:
            f = open(tmp, "wb")
        else:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
            os.fchmod(fd, mode)  # exactly: the umask may leave fewer bits, not more
            f = os.fdopen(fd, "wb")
        with f:
            f.write(data)
            if durable:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    if durable:
        fsync_dir(folder)


def fsync_dir(folder: "str | os.PathLike[str]") -> None:
    """Make a rename in ``folder`` durable (best effort: some file systems refuse)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
