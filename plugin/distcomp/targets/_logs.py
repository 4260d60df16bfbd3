"""Following log files as they grow, shared by the targets whose ranks write logs to files
(local, slurm)."""

from __future__ import annotations

from pathlib import Path


def new_lines(path: Path, offsets: dict[Path, int], partial: dict[Path, str], final: bool) -> list[str]:
    """Whole lines added to ``path`` since the last call (the last unfinished one when ``final``);
    ``offsets`` and ``partial`` carry the reader's place and unfinished line between calls."""
    try:
        with open(path, "rb") as f:
            f.seek(offsets.get(path, 0))
            data = f.read()
    except FileNotFoundError:
        return []
    offsets[path] = offsets.get(path, 0) + len(data)
    text = partial.pop(path, "") + data.decode("utf-8", "replace")
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        if final:
            lines[-1] += "\n"
        else:
            partial[path] = lines.pop()
    return lines


def tail(path: Path, n: int, indent: str, missing: str, empty: str) -> str:
    """The last ``n`` lines of ``path``, each indented, for a report; ``missing`` when it cannot
    be read, ``empty`` when it holds nothing."""
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()[-n:]
    except OSError:
        return indent + missing
    return "\n".join(indent + line for line in lines) or indent + empty
