"""``distcomp.reap``: close the runs a dead ``distcomp run`` left ``running`` (``distcomp reap``).

>>> import distcomp
>>> report = distcomp.reap()                  # every run folder under ./runs    # doctest: +SKIP
>>> report.counts["closed"], report.exit_code                                    # doctest: +SKIP
(1, 0)
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Callable, Mapping

from ..errors import UsageError

if TYPE_CHECKING:
    from ..targets.local import Reaped

__all__ = ["ReapReport", "reap"]

OUTCOMES = ("closed", "running", "elsewhere", "ended")


@dataclass(frozen=True)
class ReapReport:
    """What ``reap`` found in each run folder and did about it, in order."""

    runs: tuple["Reaped", ...]
    scanned: Path | None = None  # the folder whose run folders were reaped when none was named (./runs)

    @property
    def counts(self) -> Mapping[str, int]:
        """How many run folders had each outcome: closed, running, elsewhere (another host), ended."""
        return MappingProxyType({o: sum(r.outcome == o for r in self.runs) for o in OUTCOMES})

    @property
    def problems(self) -> tuple[str, ...]:
        """What could not be done (an MLflow run not closed, a process that would not stop)."""
        return tuple(p for r in self.runs for p in r.problems)

    @property
    def exit_code(self) -> int:
        """``distcomp reap``'s: 0, or 1 where something could not be done."""
        return 1 if self.problems else 0


def reap(*run_dirs: "str | os.PathLike[str]", grace: float = 5.0, force: bool = False,
         progress: "Callable[[Reaped], None] | None" = None) -> ReapReport:
    """For each run folder (default: every one under ./runs) whose status.json says running
    although its supervisor is gone: stop every process the job left (SIGTERM, ``grace``
    seconds, SIGKILL), mark it failed, its MLflow run FAILED. A live job is left alone; a job of
    another host is only reported, unless ``force``. ``progress`` hears each folder's outcome as
    it is known. A job that ended while its MLflow store did not answer has its run's end (and the
    points its ranks could not deliver) waiting in the folder: delivered now if the store answers
    (closed), else a problem. A named folder that is not a run folder raises a UsageError before
    any is reaped."""
    from ..targets.local import reap as reap_one

    if isinstance(grace, bool) or not isinstance(grace, (int, float)) or not grace >= 0:
        raise UsageError(f"grace must be a number of seconds >= 0 (got {grace!r})")
    scanned = None
    if run_dirs:
        dirs = [Path(d) for d in run_dirs]
        bad = [d for d in dirs if not (d / "status.json").is_file()]
        if bad:
            raise UsageError("\n".join(f"{d}: not a run folder (no status.json in it); give folders that "
                                       "`distcomp run` made, or none for those under ./runs" for d in bad))
    else:
        scanned = Path.cwd() / "runs"
        dirs = sorted(d for d in scanned.iterdir() if (d / "status.json").is_file()) if scanned.is_dir() else []
    found = []
    for run_dir in dirs:
        report = reap_one(run_dir, float(grace), force)
        found.append(report)
        if progress is not None:
            progress(report)
    return ReapReport(tuple(found), scanned)
