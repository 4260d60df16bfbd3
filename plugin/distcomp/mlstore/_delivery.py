"""What a rank could not deliver to MLflow, counted, and told to the launcher.

The logging rank writes one small JSON report into ``$DISTCOMP_TRACKING_DIR`` (the job's
``RUN_DIR/tracking``) when it ends with something undelivered; the launcher adds the reports
up for ``status.json``, the console and the run's ``distcomp.undelivered`` tag.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from ..base.files import write_atomic

REPORTS_ENV = "DISTCOMP_TRACKING_DIR"
_NOUNS = {"metrics": "metric point", "params": "param", "artifacts": "artifact file"}


@dataclass(frozen=True)
class Counts:
    """Metric points, params and artifact files."""

    metrics: int = 0
    params: int = 0
    artifacts: int = 0

    def __add__(self, other: "Counts") -> "Counts":
        return Counts(*(getattr(self, f.name) + getattr(other, f.name) for f in fields(self)))

    def __sub__(self, other: "Counts") -> "Counts":
        return Counts(*(getattr(self, f.name) - getattr(other, f.name) for f in fields(self)))

    @property
    def total(self) -> int:
        return self.metrics + self.params + self.artifacts

    def as_dict(self) -> dict[str, int]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: object) -> "Counts":
        if not isinstance(data, dict):
            return cls()
        return cls(*(max(0, int(data.get(f.name, 0) or 0)) for f in fields(cls)))


def describe(logged: Counts, undelivered: Counts) -> str:
    """``kept 12,345 of 40,000 metric points; 27,655 were not logged`` for each kind with a loss."""
    parts = []
    for kind, noun in _NOUNS.items():
        lost, total = getattr(undelivered, kind), max(getattr(logged, kind), getattr(undelivered, kind))
        if lost:
            parts.append(f"kept {total - lost:,} of {total:,} {noun}{'' if total == 1 else 's'}; {lost:,} "
                         f"{'was' if lost == 1 else 'were'} not logged")
    return "; ".join(parts)


def describe_waiting(waiting: Counts) -> str:
    """``320 metric points and 1 param`` (what waits on disk for the store)."""
    parts = [f"{n:,} {noun}{'' if n == 1 else 's'}" for kind, noun in _NOUNS.items() if (n := getattr(waiting, kind))]
    return ", ".join(parts[:-1]) + " and " + parts[-1] if len(parts) > 1 else "".join(parts)


@dataclass(frozen=True)
class Report:
    """One process's account of a run: what it logged and what never reached the store."""

    run_id: str
    pid: int
    reason: str  # "exit", "SIGTERM"
    logged: Counts
    undelivered: Counts
    error: str = ""  # the last thing the store said
    waiting: Counts = Counts()  # not lost: kept in a pending file in the same folder for distcomp to deliver

    def to_json(self) -> dict[str, object]:
        return {"run_id": self.run_id, "pid": self.pid, "reason": self.reason, "logged": self.logged.as_dict(),
                "undelivered": self.undelivered.as_dict(), "waiting": self.waiting.as_dict(), "error": self.error}


def write_report(folder: Path, report: Report) -> Path:
    """``folder/undelivered-PID.json``, written whole (a reader never sees half of it)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"undelivered-{report.pid}.json"
    write_atomic(path, json.dumps(report.to_json(), indent=2) + "\n")
    return path


def read_reports(folder: Path, run_id: str) -> tuple[list[Report], list[str]]:
    """The reports about ``run_id`` in ``folder``, and a problem for each one that cannot be read."""
    reports, problems = [], []
    for path in sorted(folder.glob("undelivered-*.json")) if folder.is_dir() else []:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            if data.get("run_id") != run_id:
                continue
            reports.append(Report(run_id, int(data.get("pid", 0)), str(data.get("reason", "")),
                                  Counts.from_dict(data.get("logged")), Counts.from_dict(data.get("undelivered")),
                                  str(data.get("error", "")), Counts.from_dict(data.get("waiting"))))
        except (OSError, ValueError, TypeError, AttributeError) as exc:
            problems.append(f"cannot read the rank's delivery report {path}: {exc}; what it counted is not "
                            "in the totals")
    return reports, problems


def add_to_status(path: Path, name: str, section: object) -> None:
    """Set ``name`` in the job's ``status.json`` (written by the runner), whole or not at all;
    nothing when there is no such file."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    data[name] = section
    try:
        write_atomic(path, json.dumps(data, indent=2) + "\n")
    except OSError:  # a full disk: the console says the same
        pass
