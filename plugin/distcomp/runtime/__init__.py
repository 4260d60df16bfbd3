"""Code that runs inside every rank. Kept import-light: a rank pays for what it uses."""

from ._logging import (
    finish,
    flush,
    is_logging_rank,
    log_artifact,
    log_artifacts,
    log_metric,
    log_metrics,
    log_param,
    log_params,
    run_id,
    undelivered,
)
from ._longjob import checkpoint_dir, preempted, restart_count
from ._progress import progress
from ._rankinfo import RankInfo, RankInfoError, rank_info

__all__ = [
    "RankInfo",
    "RankInfoError",
    "checkpoint_dir",
    "finish",
    "flush",
    "is_logging_rank",
    "log_artifact",
    "log_artifacts",
    "log_metric",
    "log_metrics",
    "log_param",
    "log_params",
    "preempted",
    "progress",
    "rank_info",
    "restart_count",
    "run_id",
    "undelivered",
]
