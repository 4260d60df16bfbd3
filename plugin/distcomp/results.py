"""What a run of a Topology's processes ends with: each process's end, the root cause of a
failure, the result.

Below every target and ``tracking``: the local target makes these records, a job's MLflow run
is ended from them (``tracking``), and a target that starts processes elsewhere reports in them
too, so no layer above needs the local target to read a result.
"""

from __future__ import annotations

import signal as _signal
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Mapping

from .outcome import JobState

__all__ = ["Failure", "FoundOutput", "ProcessResult", "RunResult", "State", "describe_exit", "describe_signal"]

State = JobState  # running in status.json meanwhile; then succeeded, failed, timed_out or cancelled


def describe_signal(number: int | None) -> str:
    """``signal 9 (SIGKILL)``."""
    try:
        name = _signal.Signals(number or 0).name
    except ValueError:
        name = "unknown signal"
    return f"signal {number} ({name})"


def describe_exit(returncode: int) -> str:
    """``exited with code 3`` or ``was killed by signal 9 (SIGKILL)``."""
    return f"was killed by {describe_signal(-returncode)}" if returncode < 0 else f"exited with code {returncode}"


@dataclass(frozen=True)
class Failure:
    """The root cause of a failed attempt: the first rank (or process) to fail."""

    name: str  # rank1, ps0, launcher0
    role: str
    node: int
    returncode: int  # negative: killed by that signal
    log: Path
    tail: tuple[str, ...] = ()
    pid: int | None = None
    after: float = 0.0  # seconds since the attempt started
    detail: str = ""  # what the launcher itself said (mpirun's report)

    def describe(self) -> str:
        where = f"{self.name} ({self.role}, node {self.node}" + (f", pid {self.pid})" if self.pid else ")")
        lines = [f"{where} {describe_exit(self.returncode)} after {self.after:.1f} s"]
        if self.detail:
            lines.append(f"  {self.detail}")
        if self.tail:
            source = str(self.log) if self.log.suffix == ".log" else f"its ranks' logs in {self.log}"  # a silent wrapper
            lines.append(f"  last lines of {source}:")
            lines += [f"    {line}" for line in self.tail]
        else:
            lines.append(f"  it printed nothing (log: {self.log})")
        return "\n".join(lines)


@dataclass(frozen=True)
class ProcessResult:
    name: str
    role: str
    node: int
    pid: int
    returncode: int | None  # None: still running when the job ended (it was then killed)
    log: Path


@dataclass(frozen=True)
class FoundOutput:
    """What an output already held when an attempt started (kept: a rank may resume from it)."""

    attempt: int  # 1-based, as the logs count
    output: str
    path: str
    files: int
    bytes: int


@dataclass(frozen=True)
class RunResult:
    state: State
    run_dir: Path
    attempts: int
    wall_s: float
    processes: tuple[ProcessResult, ...] = ()
    root_cause: Failure | None = None
    failures: tuple[Failure, ...] = ()  # root causes of earlier attempts that were restarted
    signal: int | None = None  # the signal that interrupted the job
    message: str = ""
    outputs: Mapping[str, str] = field(default_factory=dict)
    # output name -> its marker file, for every output a job that did not succeed may have left half-written
    incomplete_outputs: Mapping[str, str] = field(default_factory=dict)
    found_outputs: tuple[FoundOutput, ...] = ()
    port_retries: int = 0  # attempts started again because another program took a port

    def __post_init__(self) -> None:
        object.__setattr__(self, "state", JobState.parse(str(self.state)))

    @property
    def exit_code(self) -> int:
        return self.state.exit_code(self.signal)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["state"] = self.state.value
        data["exit_code"] = None if self.state == "running" else self.exit_code
        return _plain(data)


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return str(value) if isinstance(value, Path) else value
