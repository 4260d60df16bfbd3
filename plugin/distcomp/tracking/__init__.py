"""The launcher side of MLflow tracking: one MLflow run per distributed job.

``start_run`` creates the run before any rank starts (without importing mlflow for a SQLite
database or an MLflow server, see ``_store``), ``JobRun.env`` is what the ranks need, and
``JobRun.finish`` attaches the rank logs, tags the outcome and ends the run.
"""

from ._job import JobRun, describe, job_params, job_tags, start_run
from ._records import Metric, RunRef, TrackingError
from ._store import open_store
from ._uri import DEFAULT_URI, resolve_uri

__all__ = ["DEFAULT_URI", "JobRun", "Metric", "RunRef", "TrackingError", "describe", "job_params", "job_tags",
           "open_store", "resolve_uri", "start_run"]
