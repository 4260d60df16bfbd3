"""One job-state vocabulary for every target, the CLI, status.json and the job's MLflow run.

``JobState`` says where a job is (TorchX's ``AppState`` in spirit); ``JobOutcome`` is what a
target reports about a job, during it (state ``running``) or at its end. The values are the
lowercase words status.json and the ``distcomp.state`` tag have always held, so a
``JobState`` compares equal to them (``JobState.SUCCEEDED == "succeeded"``).
"""

from __future__ import annotations

import enum
import signal as _signal
from dataclasses import asdict, dataclass, field, replace
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Mapping

if TYPE_CHECKING:
    from .redact import Masker

__all__ = ["JobOutcome", "JobState", "TrackingRef"]


class JobState(str, enum.Enum):
    PENDING = "pending"  # submitted, nothing runs yet (a queue, pods being scheduled)
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    TIMED_OUT = "timed_out"  # its deadline passed; it was stopped
    CANCELLED = "cancelled"  # stopped on request: Ctrl-C, SIGTERM, `distcomp cancel`
    UNKNOWN = "unknown"  # the target cannot tell (its record is gone or unreadable)

    def __str__(self) -> str:
        return self.value

    @property
    def terminal(self) -> bool:
        return self in (JobState.SUCCEEDED, JobState.FAILED, JobState.TIMED_OUT, JobState.CANCELLED)

    @property
    def mlflow_status(self) -> str:
        """The MLflow run status of a job in this state."""
        return _MLFLOW[self]

    def exit_code(self, signal: int | None = None) -> int:
        """What ``distcomp run``/``submit`` exit with: 0, 1, 124 (as ``timeout``), 128+signal."""
        if self is JobState.CANCELLED:
            return 128 + (signal or _signal.SIGINT)
        return _EXIT.get(self, 1)

    @classmethod
    def parse(cls, value: str) -> "JobState":
        """A state as stored; the word earlier versions wrote for a cancelled job is read too."""
        return cls(_OLD.get(value, value))


_MLFLOW = {JobState.PENDING: "SCHEDULED", JobState.RUNNING: "RUNNING", JobState.SUCCEEDED: "FINISHED",
           JobState.FAILED: "FAILED", JobState.TIMED_OUT: "FAILED", JobState.CANCELLED: "KILLED",
           JobState.UNKNOWN: "RUNNING"}
_EXIT = {JobState.SUCCEEDED: 0, JobState.FAILED: 1, JobState.TIMED_OUT: 124}
_OLD = {"interrupted": "cancelled"}


@dataclass(frozen=True)
class TrackingRef:
    """The job's one MLflow run."""

    run_id: str
    tracking_uri: str
    experiment_id: str = ""


@dataclass(frozen=True)
class JobOutcome:
    """A job as its target sees it: where it is, and once it ended, how and why."""

    job_id: str  # TARGET:ID, what `distcomp status|logs|cancel` take
    state: JobState
    exit_code: int | None = None  # None while it runs
    root_cause: str = ""  # the first failure: which rank, on which node, its last lines
    message: str = ""  # the target's own word on the state (a condition, a reason)
    outputs: Mapping[str, str] = field(default_factory=dict)  # output name -> where it is
    started: float | None = None  # epoch seconds
    ended: float | None = None
    wall_s: float | None = None
    tracking: TrackingRef | None = None
    details: Mapping[str, Any] = field(default_factory=dict)  # the target's own record (status.json, ...)

    def __post_init__(self) -> None:
        object.__setattr__(self, "state", JobState.parse(str(self.state.value if isinstance(self.state, JobState)
                                                              else self.state)))
        object.__setattr__(self, "outputs", MappingProxyType(dict(self.outputs)))
        object.__setattr__(self, "details", MappingProxyType(dict(self.details)))

    @property
    def done(self) -> bool:
        return self.state.terminal

    @property
    def succeeded(self) -> bool:
        return self.state is JobState.SUCCEEDED

    def to_json(self) -> dict[str, Any]:
        return {"job_id": self.job_id, "state": self.state.value, "exit_code": self.exit_code,
                "root_cause": self.root_cause, "message": self.message, "outputs": dict(self.outputs),
                "started": self.started, "ended": self.ended, "wall_s": self.wall_s,
                "tracking": asdict(self.tracking) if self.tracking else None, "details": dict(self.details)}

    def masked(self, masker: "Masker") -> "JobOutcome":
        """A copy safe to show: the job's secrets masked in its words and its target's record."""
        return replace(self, root_cause=masker.text(self.root_cause), message=masker.text(self.message),
                       details=masker.data(dict(self.details)))

    def summary(self) -> str:
        """One line: ``JOB: succeeded in 3.1 s`` / ``JOB: failed: CAUSE``."""
        took = f" in {self.wall_s:.1f} s" if self.wall_s is not None and self.done else ""
        why = self.root_cause.splitlines()[0] if self.root_cause else self.message
        return f"{self.job_id}: {self.state.value}{took}" + (f": {why}" if why and not self.succeeded else "")
