"""The long-job contract as every rank and every supervisor sees it: a restart count, a
checkpoint folder that outlives attempts, and the preemption notice. Standard library only: the
node agent (an srun task, a pod, a Ray actor), the local target and ``distcomp.runtime`` all
import it, so the names never drift apart.

A notice is a file (``NOTICE_ENV`` names it, one per attempt): a supervisor that is told the
job will be stopped (Slurm's ``--signal``, SIGTERM from Kubernetes, Ray or ``distcomp run``'s
own) writes it, and a rank asks for it with ``runtime.preempted()``, a ``stat`` cheap enough
for every step. A file, not a signal to the ranks: a framework may own a rank's signal
handlers (torch's elastic agent, Lightning), and a file is seen on every node that shares it.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

RESTART_ENV = "DISTCOMP_RESTART_COUNT"  # 0 on the first attempt; a requeue counts too
MAX_RESTARTS_ENV = "DISTCOMP_MAX_RESTARTS"
CHECKPOINT_ENV = "DISTCOMP_CHECKPOINT_DIR"  # one folder per job, every rank's, across attempts
NOTICE_ENV = "DISTCOMP_NOTICE_FILE"  # exists once the scheduler gave notice of a stop
PREEMPTED_EXIT = 143  # what a rank that left on notice may exit with (as after SIGTERM): not a failure

__all__ = ["CHECKPOINT_ENV", "MAX_RESTARTS_ENV", "NOTICE_ENV", "PREEMPTED_EXIT", "RESTART_ENV", "RestartRule",
           "give_notice", "long_job_env", "notice_file"]


def notice_file(job_dir: str, attempt: int) -> str:
    """The notice file of ``attempt`` in ``job_dir``: an old attempt's notice never reaches a new one."""
    return os.path.join(job_dir, f"preempt-notice.{attempt}")


def long_job_env(checkpoint_dir: str, job_dir: str, attempt: int, max_restarts: int) -> dict[str, str]:
    """What every rank of ``attempt`` gets (its restart count, the checkpoint folder, where notice comes)."""
    return {RESTART_ENV: str(attempt), MAX_RESTARTS_ENV: str(max_restarts), CHECKPOINT_ENV: checkpoint_dir,
            NOTICE_ENV: notice_file(job_dir, attempt)}


def give_notice(path: str, why: str) -> None:
    """Write the notice file (its text: why and when); a notice that cannot be written is no
    reason to stop the stop: the ranks are then ended by the signal after the grace."""
    try:
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        with open(path, "a", encoding="utf-8") as f:
            f.write(f"{time.time():.3f} {why}\n")
    except OSError:
        pass


@dataclass
class RestartRule:
    """The one restart rule, kept alike by every target's loop (the local runner, the Ray driver,
    the Slurm job script's): after an attempt that did not succeed, the whole job starts again
    when its cause allows. A failure uses one of ``max_restarts``; a preemption or a lost node
    uses none (the placement or the scheduler bounds those). ``causes``: one line per restart."""

    max_restarts: int
    attempt: int = 0  # the restart count of the attempt that runs now
    failures: int = 0  # restarts made after a failure
    causes: list[str] = field(default_factory=list)

    def again(self, cause: str, failure: bool = True) -> bool:
        """Whether the job starts again after the attempt that ended for ``cause``; on yes the
        restart is counted and its cause kept."""
        if failure and self.failures >= self.max_restarts:
            return False
        self.failures += int(failure)
        self.attempt += 1
        first = next((line.strip() for line in cause.splitlines() if line.strip()), "no cause given")
        self.causes.append(f"attempt {self.attempt} {'failed' if failure else 'was preempted'}: {first}")
        return True
