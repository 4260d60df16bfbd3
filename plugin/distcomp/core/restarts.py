"""How a job's restarts are told, the same for every target: ``distcomp.restarts`` (the count)
and one ``distcomp.restart.N`` tag per restart with its cause (a failure, a preemption, a lost
node), on the job's one MLflow run; ``distcomp status`` shows the same lines."""

from __future__ import annotations

from typing import Sequence

RESTARTS_TAG = "distcomp.restarts"
_CAUSE = "distcomp.restart.{}"
_MAX = 4000  # an MLflow tag value holds 8000 characters; a cause is one line


def restart_tags(causes: Sequence[str]) -> dict[str, str]:
    """The tags of a job whose attempts after the first started for ``causes``, in order
    (none: the count 0, said, so a query can tell a job that never restarted)."""
    tags = {RESTARTS_TAG: str(len(causes))}
    tags.update({_CAUSE.format(n): cause[:_MAX] for n, cause in enumerate(causes, 1)})
    return tags


def describe_restarts(causes: Sequence[str]) -> list[str]:
    """The lines ``distcomp status`` shows: one per restart."""
    return [f"restart {n}: {cause}" for n, cause in enumerate(causes, 1)]
