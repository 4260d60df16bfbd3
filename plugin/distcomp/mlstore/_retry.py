"""When to try an MLflow server again, as MLflow's own client does.

MLflow's REST client (``mlflow/utils/request_utils.py``) retries connection errors and the
answers 408, 429, 500, 502, 503 and 504 with urllib3's exponential backoff: no wait before the
first retry, then ``factor * 2**(n-1)`` seconds plus up to ``jitter`` at random, at most 120 s,
honouring a server's ``Retry-After``. The same environment variables set it here, with the
same defaults (7 retries, factor 2: about four minutes before a request is given up).
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, replace
from typing import Mapping

from ._records import TrackingError

TRANSIENT_HTTP = frozenset({408, 429, 500, 502, 503, 504})  # mlflow's _TRANSIENT_FAILURE_RESPONSE_CODES
BACKOFF_MAX = 120.0  # urllib3's Retry.DEFAULT_BACKOFF_MAX


@dataclass(frozen=True)
class Retry:
    """How often and how patiently one request is repeated before it is given up."""

    max_retries: int = 7
    backoff_factor: float = 2.0
    backoff_jitter: float = 1.0
    timeout: float = 120.0  # seconds per attempt
    respect_retry_after: bool = True
    until: float | None = None  # a ``time.monotonic()`` deadline: no retry waits past it (the last try is short)

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> "Retry":
        """MLflow's ``MLFLOW_HTTP_REQUEST_{MAX_RETRIES,BACKOFF_FACTOR,BACKOFF_JITTER,TIMEOUT}`` and
        ``MLFLOW_HTTP_RESPECT_RETRY_AFTER_HEADER``; MLflow's defaults where unset."""
        default = cls()
        respect = env.get("MLFLOW_HTTP_RESPECT_RETRY_AFTER_HEADER", "true").strip().lower()
        return cls(int(_number(env, "MLFLOW_HTTP_REQUEST_MAX_RETRIES", default.max_retries, int)),
                   _number(env, "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR", default.backoff_factor, float),
                   _number(env, "MLFLOW_HTTP_REQUEST_BACKOFF_JITTER", default.backoff_jitter, float),
                   _number(env, "MLFLOW_HTTP_REQUEST_TIMEOUT", default.timeout, float),
                   respect not in ("0", "false", "no"))

    def brief(self) -> "Retry":
        """A few quick tries: for a first contact (a server that never answered is most likely not
        there: say so in seconds, not minutes) and for a rank, which keeps what failed and sends
        it again later rather than hold its sender for minutes."""
        return replace(self, max_retries=min(self.max_retries, 2), backoff_factor=min(self.backoff_factor, 0.25),
                       backoff_jitter=min(self.backoff_jitter, 0.25), timeout=min(self.timeout, 10.0))

    def within(self, seconds: float) -> "Retry":
        """The same policy, given up ``seconds`` from now: the end of a job must not wait minutes
        for a store that went away (what it could not send waits on disk instead)."""
        return replace(self, until=time.monotonic() + max(0.0, seconds))

    def left(self) -> float | None:
        """Seconds until the deadline (0 once passed), None without one."""
        return None if self.until is None else max(0.0, self.until - time.monotonic())

    def delay(self, retry: int, retry_after: float | None = None) -> float:
        """Seconds to wait before retry number ``retry`` (1, 2, ...), as urllib3 computes it."""
        if retry_after is not None and self.respect_retry_after:
            return min(max(retry_after, 0.0), BACKOFF_MAX)
        if retry <= 1:
            return 0.0
        wait = self.backoff_factor * 2 ** (retry - 1) + random.random() * self.backoff_jitter
        return min(wait, BACKOFF_MAX)


def _number(env: Mapping[str, str], name: str, default: float, kind: type) -> float:
    text = env.get(name, "").strip()
    if not text:
        return default
    timeout = name.endswith("TIMEOUT")
    try:
        value = kind(text)
    except ValueError:
        value = -1
    if value < 0 or (timeout and value == 0):
        raise TrackingError(f"{name}={text!r}: expected {'a whole number' if kind is int else 'a number'} "
                            f"{'> 0' if timeout else '>= 0'}; unset it for MLflow's default ({default:g})")
    return value
