"""Each rank's last beat (``agent.progress``) in a job's outcome: ``details["progress"]``, what
``distcomp status`` shows a line per rank of. A target whose ranks beat into a folder this
machine reads (the Slurm job folder, the Ray job's progress folder) adds it to every status."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from ..records import JobOutcome


def with_progress(outcome: JobOutcome, folder: Path | None) -> JobOutcome:
    """``outcome`` with the beats in ``folder`` as ``details["progress"]`` (as it is: none there)."""
    from ..agent.progress import read

    beats = read(str(folder)) if folder is not None else {}
    if not beats:
        return outcome
    return replace(outcome, details={**outcome.details, "progress": beats})
