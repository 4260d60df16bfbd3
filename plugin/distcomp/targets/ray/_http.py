"""The Jobs API's REST routes that status, cancel and a job's log need, over urllib: the same
answers as ``ray.job_submission.JobSubmissionClient`` (a job's record, its log, a stop) without
importing ray, which costs 1-2 s of each ``distcomp status|cancel|logs ray:ID``'s start."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

TERMINAL = frozenset({"SUCCEEDED", "FAILED", "STOPPED"})
TIMEOUT = 30.0  # seconds per request: the dashboard answers in milliseconds unless the head is in trouble


@dataclass(frozen=True)
class Status:
    """A job's state as Ray's JobStatus reads (``.value``, ``is_terminal()``)."""

    value: str

    def is_terminal(self) -> bool:
        return self.value in TERMINAL

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Client:
    """The Jobs API at ``address``: errors are RuntimeError with the dashboard's word, as Ray's client's."""

    address: str

    def _call(self, method: str, route: str) -> Any:
        url = f"{self.address}/api/jobs/{urllib.parse.quote(route, safe='/')}"
        request = urllib.request.Request(url, method=method, data=b"" if method == "POST" else None)
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT) as r:
                return json.loads(r.read().decode("utf-8"))
        except urllib.error.HTTPError as exc:
            said = exc.read().decode("utf-8", "replace").strip()
            raise RuntimeError(f"Request failed with status code {exc.code}: {said}") from None
        except (urllib.error.URLError, OSError, ValueError) as exc:
            raise RuntimeError(f"the Jobs API at {self.address} did not answer: {exc}") from None

    def get_job_info(self, job_id: str) -> SimpleNamespace:
        data = self._call("GET", job_id)
        if not isinstance(data, dict):
            raise RuntimeError(f"Job {job_id} does not exist (the Jobs API answered {data!r})")
        driver = data.get("driver_info")
        return SimpleNamespace(**{**data, "status": Status(str(data.get("status") or "PENDING")),
                                  "driver_info": SimpleNamespace(**driver) if isinstance(driver, dict) else None})

    def get_job_logs(self, job_id: str) -> str:
        return str(self._call("GET", f"{job_id}/logs").get("logs") or "")

    def stop_job(self, job_id: str) -> bool:
        return bool(self._call("POST", f"{job_id}/stop").get("stopped"))
