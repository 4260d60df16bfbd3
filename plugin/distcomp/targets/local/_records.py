"""Records of a local run: its options; the result records (each process's end, the root
cause, the result) are the core's, in ``distcomp.records``."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from ...errors import OptionError
from ...base.redact import Masker
from ...records import (  # noqa: F401  (re-exported: the local target's names for them)
    Failure, FoundOutput, ProcessResult, RunResult, describe_exit, describe_signal,
)


@dataclass(frozen=True)
class RunOptions:
    run_dir: Path
    timeout: float | None = None  # seconds for the whole job, restarts included
    max_restarts: int = 0
    grace: float = 5.0  # seconds between SIGTERM and SIGKILL when a job is stopped
    echo: bool = True  # copy rank output to the console with a [rankN] prefix
    job_id: str = "distcomp"
    env: Mapping[str, str] = field(default_factory=dict)  # set in every process, over the spec's (tracking)
    record: Mapping[str, Any] = field(default_factory=dict)  # more for status.json (the MLflow run)
    masker: Masker | None = None  # the job's secrets; None: from its inputs and env (``redact.job_masker``)
    # a resumed job (``distcomp run --resume``): the attempts before it, the restarts those made
    # for a failure (counted against max_restarts), and every earlier restart's cause
    first_attempt: int = 0
    failures_used: int = 0
    restarts: tuple[str, ...] = ()
    # end the job as hung when no rank has beaten (agent.progress) for this long (None: never)
    hang_timeout: float | None = None

    def __post_init__(self) -> None:
        if self.timeout is not None and self.timeout <= 0:
            raise OptionError(f"timeout must be > 0 seconds (got {self.timeout})")
        if self.max_restarts < 0:
            raise OptionError(f"max_restarts must be >= 0 (got {self.max_restarts})")
        if self.grace < 0:
            raise OptionError(f"grace must be >= 0 seconds (got {self.grace})")
