"""``restart_count``, ``checkpoint_dir`` and ``preempted``: what a rank of a long job asks
(``distcomp.agent.longjob`` is the contract the supervisors keep)."""

from __future__ import annotations

import os
from pathlib import Path

from ..agent.longjob import CHECKPOINT_ENV, NOTICE_ENV, RESTART_ENV


def restart_count() -> int:
    """0 on a job's first attempt, then 1, 2, ...: failures restarted and requeues alike. Outside
    distcomp, torch's ``TORCHELASTIC_RESTART_COUNT`` where set, else 0."""
    for name in (RESTART_ENV, "TORCHELASTIC_RESTART_COUNT"):
        value = os.environ.get(name, "")
        if value.isdigit():
            return int(value)
    return 0


def checkpoint_dir() -> Path:
    """The job's checkpoint folder, made if missing: one per job, seen by every rank on every
    node, kept across restarts, requeues and ``--resume``. Outside distcomp: ./checkpoint."""
    path = Path(os.environ.get(CHECKPOINT_ENV) or "checkpoint").absolute()
    path.mkdir(parents=True, exist_ok=True)
    return path


def preempted() -> bool:
    """Whether the scheduler has given notice that this attempt will be stopped (Slurm's
    ``--signal``, SIGTERM from Kubernetes or Ray, SIGTERM to ``distcomp run``): save a
    checkpoint and leave within the grace; the job comes back and resumes from it."""
    path = os.environ.get(NOTICE_ENV, "")
    return bool(path) and os.path.exists(path)
