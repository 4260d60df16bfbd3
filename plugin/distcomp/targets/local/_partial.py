"""Outputs that are not (yet) a finished job's: a marker the user sees, and what each attempt found.

A marker ``NAME.distcomp-incomplete`` is written beside every output (folder or file) before
the first rank starts, so even a job whose machine died leaves it; it goes when the job
succeeds. Beside, not inside: the folder is the ranks' own, and code that checks it is empty
or resumes from "the newest file" in it must not meet a file distcomp put there. Files
already in an output when an attempt starts are kept, not deleted: a restarted rank often
resumes from its checkpoint there (torchelastic's model), so each attempt says what it found.
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping

from ...base.files import tree_usage
from ._records import FoundOutput

MARKER = ".distcomp-incomplete"


def marker(path: str) -> Path:
    p = Path(path)
    return p.with_name(p.name + MARKER)


def mark(markers: Mapping[str, str], text: str) -> None:
    """Write (or rewrite) every marker."""
    for path in markers.values():
        try:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            Path(path).write_text(text, encoding="utf-8")
        except OSError:  # the job's own result says what happened; a marker is a courtesy
            pass


def unmark(markers: Mapping[str, str]) -> None:
    for path in markers.values():
        Path(path).unlink(missing_ok=True)


def survey(outputs: Mapping[str, str], attempt: int) -> list[FoundOutput]:
    """The outputs that already hold something, with their file count and size."""
    found = []
    for name, path in outputs.items():
        files, size = tree_usage(path)
        if files:
            found.append(FoundOutput(attempt, name, path, files, size))
    return found


def describe(found: FoundOutput) -> str:
    """``attempt 2 starts with 3 file(s) (1.2 kB) kept from attempt 1 in /.../outputs/model``."""
    size = f"{found.bytes} B" if found.bytes < 1000 else f"{found.bytes / 1000:.1f} kB" if found.bytes < 10**6 \
        else f"{found.bytes / 10**6:.1f} MB"
    where = f"kept from attempt {found.attempt - 1}" if found.attempt > 1 else "from before this job, kept"
    return f"attempt {found.attempt} starts with {found.files} file(s) ({size}) {where} in {found.path}"
