"""The launcher side of MLflow tracking: one MLflow run per distributed job.

``start_run`` creates the run before any rank starts (without importing mlflow for a SQLite
database or an MLflow server, see ``_store``), ``JobRun.env`` is what the ranks need, and
``JobRun.finish`` attaches the rank logs, tags the outcome and ends the run. ``_delivery`` is
how a rank tells the launcher what it could not deliver.
"""

from ._ending import end_run, ended_state
from ._delivery import REPORTS_ENV, Counts, Report, describe as describe_loss, read_reports, write_report
from ._job import EXPERIMENT_KIND, RANK_SITE, JobRun, describe, job_params, job_tags, run_name, start_run
from ._records import Metric, RunRef, StoreUnavailable, TrackingError
from ._retry import Retry
from ._store import open_store
from ._uri import DEFAULT_URI, resolve_uri, usable_uri

__all__ = ["DEFAULT_URI", "EXPERIMENT_KIND", "RANK_SITE", "REPORTS_ENV", "Counts", "JobRun", "Metric", "Report", "Retry", "RunRef", "StoreUnavailable",
           "TrackingError", "describe", "describe_loss", "end_run", "ended_state", "job_params", "job_tags", "open_store", "read_reports",
           "resolve_uri", "run_name", "start_run", "usable_uri", "write_report"]
