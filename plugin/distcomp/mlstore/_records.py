"""Records of the launcher side of tracking: where the store is and which run a job writes."""

from __future__ import annotations

import getpass
from dataclasses import dataclass
from typing import Mapping

from ..errors import UsageError
from ..base.redact import REDACTED, SECRET_NAME  # noqa: F401  (one rule for the whole package; re-exported)

# MLflow's own limits (mlflow/utils/validation.py): longer values are refused by every store.
MAX_KEY = 250
MAX_PARAM_VALUE = 6000
MAX_TAG_VALUE = 8000
MAX_PARAMS_TAGS_PER_BATCH = 100
MAX_METRICS_PER_BATCH = 1000

TERMINAL_STATUSES = ("FINISHED", "FAILED", "KILLED")

# the tags of a job's end, the same on every target (local, reap, Slurm, Kubeflow)
STATE_TAG = "distcomp.state"  # the job's JobState
FAILURE_TAG = "distcomp.failure"  # why a FAILED run failed: the root cause, else the target's reason
MESSAGE_TAG = "distcomp.message"  # the target's own word on the end, when it has one


class TrackingError(UsageError):
    """The store cannot be used: unreachable, refused, or not a kind distcomp can write."""


class StoreUnavailable(TrackingError):
    """The store did not answer, or answered "try later" (a connection refused or reset, HTTP
    408/429/5xx, a database locked past its timeout), after the retries: what was sent may
    succeed later, unlike a refusal."""


@dataclass(frozen=True)
class RunRef:
    """One MLflow run as the ranks see it."""

    run_id: str
    experiment_id: str
    artifact_uri: str
    name: str = ""


@dataclass(frozen=True)
class RunData:
    """What a run already holds, so a job attached to it adds to it instead of overwriting."""

    tags: Mapping[str, str]
    params: Mapping[str, str]


@dataclass(frozen=True)
class StoredRun:
    """A run as a search of an experiment finds it: enough to tell whose it is."""

    run_id: str
    name: str
    experiment_id: str
    start_ms: int
    tags: Mapping[str, str]


@dataclass(frozen=True)
class Metric:
    """One metric point, as MLflow stores it (timestamp in ms since the epoch)."""

    key: str
    value: float
    timestamp: int
    step: int = 0


def truncate(value: str, limit: int) -> str:
    """``value`` cut to ``limit`` characters, marked so a reader knows it was cut."""
    if len(value) <= limit:
        return value
    mark = " ... [cut by distcomp]"
    return value[: limit - len(mark)] + mark


def user() -> str:
    """The user MLflow records for a run (``mlflow.user``)."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown"
