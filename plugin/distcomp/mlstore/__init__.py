"""The MLflow store client that both sides of a job use: the launcher (``distcomp.tracking``
creates and ends the job's run) and every rank (``distcomp.runtime`` sends its metrics).

``open_store`` picks the fastest way to write a store faithfully (``_sqlite``: MLflow's own
tables with ``sqlite3``; ``_rest``: a server's REST API over urllib; ``_client``: MLflow
itself, for anything else). ``_delivery`` is how a rank tells the launcher what it could not
deliver. Below both ``tracking`` and ``runtime``, so a rank never imports the launcher side.
"""

from ._delivery import REPORTS_ENV, Counts, Report, describe as describe_loss, read_reports, write_report
from ._records import Metric, RunRef, StoreUnavailable, TrackingError
from ._retry import Retry
from ._store import open_store
from ._uri import DEFAULT_URI, resolve_uri, usable_uri

__all__ = ["DEFAULT_URI", "REPORTS_ENV", "Counts", "Metric", "Report", "Retry", "RunRef", "StoreUnavailable",
           "TrackingError", "describe_loss", "open_store", "read_reports", "resolve_uri", "usable_uri",
           "write_report"]
