"""The launcher side of MLflow tracking: one MLflow run per distributed job.

``start_run`` creates the run before any rank starts (without importing mlflow for a SQLite
database or an MLflow server, see ``distcomp.mlstore``), ``JobRun.env`` is what the ranks need, and
``JobRun.finish`` attaches the rank logs, tags the outcome and ends the run. The stores
themselves are ``distcomp.mlstore``'s.
"""

# the store client lives below this package (``distcomp.mlstore``, which the ranks use too);
# its names stay importable from here
from ..mlstore import (DEFAULT_URI, REPORTS_ENV, Counts, Metric, Report, Retry, RunRef, StoreUnavailable,
                       TrackingError, describe_loss, open_store, read_reports, resolve_uri, usable_uri, write_report)
from ._ending import end_run, ended_state
from ._handover import deliver_later
from ._job import EXPERIMENT_KIND, RANK_SITE, JobRun, describe, job_params, job_tags, run_name, start_run

__all__ = ["DEFAULT_URI", "EXPERIMENT_KIND", "RANK_SITE", "REPORTS_ENV", "Counts", "JobRun", "Metric", "Report", "Retry", "RunRef", "StoreUnavailable",
           "TrackingError", "deliver_later", "describe", "describe_loss", "end_run", "ended_state", "job_params", "job_tags", "open_store", "read_reports",
           "resolve_uri", "run_name", "start_run", "usable_uri", "write_report"]
