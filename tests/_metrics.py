"""What tests read of a job's MLflow run."""

from __future__ import annotations

from typing import Mapping


def ranks_metrics(metrics: Mapping[str, float]) -> dict[str, float]:
    """The ranks' metrics: without the nodes' system metrics (``system/<node>/...``, on by default)."""
    return {k: v for k, v in metrics.items() if not k.startswith("system/")}
