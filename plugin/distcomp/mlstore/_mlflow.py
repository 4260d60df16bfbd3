"""MLflow's own client as a store, or a clear error where MLflow is not installed; apart from
``_store`` so that ``_artifacts`` (which ``_sqlite`` and ``_rest`` use) reaches it without a cycle."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._records import TrackingError

if TYPE_CHECKING:
    from ._client import ClientStore


def mlflow_store(uri: str) -> "ClientStore":
    try:
        from ._client import ClientStore
    except ImportError as exc:  # mlflow is not installed
        raise TrackingError(f"the tracking store {uri} needs MLflow, which is not installed ({exc}); "
                            "pip install 'distcomp[mlflow]', or pass --no-tracking") from None
    return ClientStore(uri)
