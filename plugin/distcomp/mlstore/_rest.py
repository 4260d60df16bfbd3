"""An MLflow server through its REST API (``/api/2.0/mlflow``), with urllib only.

Authentication as MLflow's client does it: ``MLFLOW_TRACKING_TOKEN`` (bearer) or
``MLFLOW_TRACKING_USERNAME``/``PASSWORD`` (basic), ``MLFLOW_TRACKING_INSECURE_TLS`` and
``MLFLOW_TRACKING_SERVER_CERT_PATH``. Other set-ups (client certificates, auth plugins,
SigV4) are left to MLflow itself. Connection errors and HTTP 408/429/5xx are retried as
MLflow's client retries them (``_retry``); until the server has answered once, only briefly.
"""

from __future__ import annotations

import base64
import http.client
import json
import math
import ssl
import time
import urllib.error
import urllib.request
from pathlib import Path, PurePosixPath
from typing import Any, Mapping, Sequence
from urllib.parse import quote, urlencode, urlsplit

from ._artifacts import copy_files, local_root, safe_artifact_path, upload_with_mlflow
from ._params import KnownParams, fit, log_new
from ._records import (MAX_METRICS_PER_BATCH, MAX_PARAMS_TAGS_PER_BATCH, Metric, RunData, RunRef, StoredRun,
                       StoreUnavailable, TrackingError)
from ._retry import TRANSIENT_HTTP, Retry

_UNSUPPORTED = ("MLFLOW_TRACKING_CLIENT_CERT_PATH", "MLFLOW_TRACKING_AUTH", "MLFLOW_TRACKING_AWS_SIGV4",
                "MLFLOW_ENABLE_WORKSPACES", "MLFLOW_WORKSPACE")


def usable(env: Mapping[str, str]) -> bool:
    return not any(env.get(name, "").strip().lower() not in ("", "0", "false") for name in _UNSUPPORTED)


class _Transient(Exception):
    """One attempt failed in a way worth another: the text, and the server's Retry-After."""

    def __init__(self, text: str, retry_after: float | None = None, hint: str = "") -> None:
        super().__init__(text)
        self.retry_after, self.hint = retry_after, hint


class RestStore:
    def __init__(self, uri: str, env: Mapping[str, str], retry: Retry | None = None) -> None:
        self.uri = uri
        self.retry = retry or Retry.from_env(env)
        self.answered = False  # has the server answered this process yet? (then: full patience)
        self.params = KnownParams(lambda run_id: self.run_data(run_id).params)
        self.base = uri.rstrip("/")
        self.headers = {"Content-Type": "application/json", "User-Agent": "distcomp"}
        if env.get("MLFLOW_TRACKING_TOKEN"):
            self.headers["Authorization"] = f"Bearer {env['MLFLOW_TRACKING_TOKEN']}"
        elif env.get("MLFLOW_TRACKING_USERNAME"):
            pair = f"{env['MLFLOW_TRACKING_USERNAME']}:{env.get('MLFLOW_TRACKING_PASSWORD', '')}"
            self.headers["Authorization"] = "Basic " + base64.b64encode(pair.encode()).decode()
        self.context: ssl.SSLContext | None = None
        if urlsplit(uri).scheme == "https":
            if env.get("MLFLOW_TRACKING_INSECURE_TLS", "").lower() in ("1", "true"):
                self.context = ssl._create_unverified_context()
            else:
                self.context = ssl.create_default_context(cafile=env.get("MLFLOW_TRACKING_SERVER_CERT_PATH") or None)

    # -- transport ---------------------------------------------------------------------------
    def _call(self, method: str, path: str, body: Any = None, query: Mapping[str, str] | None = None,
              data: bytes | None = None, ok_codes: tuple[str, ...] = (), base: str | None = None) -> dict[str, Any]:
        url = f"{base or self.base}{path}" + (f"?{urlencode(query)}" if query else "")
        payload = data if data is not None else (json.dumps(body).encode() if body is not None else None)
        headers = dict(self.headers)
        if data is not None:
            headers["Content-Type"] = "application/octet-stream"
        retry = self.retry if self.answered else self.retry.brief()
        attempt = 0
        while True:
            try:
                return self._once(urllib.request.Request(url, payload, headers, method=method), retry, ok_codes)
            except _Transient as exc:
                attempt += 1
                left = retry.left()
                if attempt > retry.max_retries or left == 0:
                    hint = f"; {exc.hint}" if exc.hint else ""
                    raise StoreUnavailable(f"{exc} ({attempt} {'try' if attempt == 1 else 'tries'}{hint})") from None
                wait = retry.delay(attempt, exc.retry_after)
                time.sleep(wait if left is None else min(wait, left))  # a last try at the deadline

    def _once(self, request: urllib.request.Request, retry: Retry, ok_codes: tuple[str, ...]) -> dict[str, Any]:
        what = f"{request.get_method()} {urlsplit(request.full_url).path}"
        try:
            left = retry.left()  # past a deadline one short attempt is still made: the store may be back
            timeout = retry.timeout if left is None else min(retry.timeout, max(left, 1.0))
            with urllib.request.urlopen(request, timeout=timeout, context=self.context) as response:
                raw = response.read()
        except urllib.error.HTTPError as exc:
            self.answered = True
            text = exc.read().decode("utf-8", "replace")
            try:
                error = json.loads(text)
            except ValueError:
                error = {"message": text.strip()[:300]}
            code = error.get("error_code", "") if isinstance(error, dict) else ""
            message = f"{code} {error.get('message', '') if isinstance(error, dict) else ''}".strip()
            if exc.code in TRANSIENT_HTTP:
                raise _Transient(f"the MLflow server {self.base} answered {what} with HTTP {exc.code} {message}"
                                 .rstrip(), _seconds(exc.headers.get("Retry-After"))) from None
            if code in ok_codes:
                return {"error_code": code}
            raise TrackingError(f"the MLflow server {self.base} refused {what}: HTTP {exc.code} {message}"
                                .rstrip()) from None
        except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
            reason = getattr(exc, "reason", None) or str(exc) or type(exc).__name__
            if isinstance(reason, ssl.SSLError):  # a certificate is refused: no retry changes that
                raise TrackingError(f"cannot reach the MLflow server {self.base}: {reason}") from None
            raise _Transient(f"cannot reach the MLflow server {self.base}: {reason}",
                             hint="is `mlflow server` running there? or pass --no-tracking") from None
        self.answered = True
        try:
            return json.loads(raw) if raw.strip() else {}
        except ValueError:
            raise TrackingError(f"the MLflow server {self.base} answered {what} with something other than "
                                f"JSON: {raw[:200]!r} (is {self.base} an MLflow server?)") from None

    # -- the Store protocol ------------------------------------------------------------------
    def experiment(self, name: str, tags: Mapping[str, str] = {}) -> str:
        for _ in range(2):  # a concurrent job may create it between our get and create
            got = self._call("GET", "/api/2.0/mlflow/experiments/get-by-name", query={"experiment_name": name},
                             ok_codes=("RESOURCE_DOES_NOT_EXIST",))
            if "experiment" in got:
                exp = got["experiment"]
                if exp.get("lifecycle_stage", "active") != "active":
                    raise TrackingError(f"experiment {name!r} is deleted on {self.base}; restore it or pick "
                                        "another with --experiment")
                return str(exp["experiment_id"])
            made = self._call("POST", "/api/2.0/mlflow/experiments/create",
                              {"name": name, "tags": [{"key": k, "value": v} for k, v in tags.items()]},
                              ok_codes=("RESOURCE_ALREADY_EXISTS",))
            if "experiment_id" in made:
                return str(made["experiment_id"])
        raise TrackingError(f"cannot create or find experiment {name!r} on {self.base}")

    def create_run(self, experiment_id: str, name: str, tags: Mapping[str, str],
                   params: Mapping[str, str]) -> RunRef:
        body = {"experiment_id": experiment_id, "run_name": name, "start_time": int(time.time() * 1000),
                "tags": [{"key": k, "value": v} for k, v in tags.items()]}
        if "mlflow.user" in tags:
            body["user_id"] = tags["mlflow.user"]
        info = self._call("POST", "/api/2.0/mlflow/runs/create", body)["run"]["info"]
        run = RunRef(info["run_id"], str(info["experiment_id"]), info.get("artifact_uri", ""), name)
        self.params.created(run.run_id)
        problems = self.log(run.run_id, {}, params)
        if problems:  # a run this process made holds no params but its own
            raise TrackingError("; ".join(problems))
        return run

    def get_run(self, run_id: str) -> RunRef:
        got = self._call("GET", "/api/2.0/mlflow/runs/get", query={"run_id": run_id},
                         ok_codes=("RESOURCE_DOES_NOT_EXIST",))
        if "run" not in got or got["run"]["info"].get("lifecycle_stage", "active") != "active":
            raise TrackingError(f"MLflow run {run_id} does not exist (or is deleted) on {self.base}")
        info = got["run"]["info"]
        return RunRef(run_id, str(info["experiment_id"]), info.get("artifact_uri", ""), info.get("run_name", ""))

    def runs_since(self, experiment_id: str, since_ms: int) -> list[StoredRun]:
        got = self._call("POST", "/api/2.0/mlflow/runs/search",
                         {"experiment_ids": [experiment_id], "filter": f"attributes.start_time >= {int(since_ms)}",
                          "run_view_type": "ACTIVE_ONLY", "max_results": 1000, "order_by": ["attributes.start_time ASC"]})
        found = []
        for run in got.get("runs", []):
            info, tags = run.get("info", {}), run.get("data", {}).get("tags", [])
            found.append(StoredRun(info["run_id"], info.get("run_name", ""), str(info.get("experiment_id", "")),
                                   int(info.get("start_time", 0)), {t["key"]: t.get("value", "") for t in tags}))
        return found

    def run_data(self, run_id: str) -> RunData:
        data = self._call("GET", "/api/2.0/mlflow/runs/get", query={"run_id": run_id})["run"].get("data", {})
        return RunData({t["key"]: t.get("value", "") for t in data.get("tags", [])},
                       {p["key"]: p.get("value", "") for p in data.get("params", [])})

    def log(self, run_id: str, tags: Mapping[str, str], params: Mapping[str, str] = {},
            metrics: Sequence[Metric] = ()) -> list[str]:
        tags, params = fit(tags, params)  # MLflow's limit, said in a tag
        for i in range(0, len(metrics), MAX_METRICS_PER_BATCH):
            points = [{"key": m.key, "value": _json_float(m.value), "timestamp": m.timestamp, "step": m.step}
                      for m in metrics[i:i + MAX_METRICS_PER_BATCH]]
            self._call("POST", "/api/2.0/mlflow/runs/log-batch", {"run_id": run_id, "metrics": points})
        items = [{"key": k, "value": v} for k, v in tags.items()]
        for i in range(0, len(items), MAX_PARAMS_TAGS_PER_BATCH):  # tags apart: a param conflict costs none
            self._call("POST", "/api/2.0/mlflow/runs/log-batch",
                       {"run_id": run_id, "tags": items[i:i + MAX_PARAMS_TAGS_PER_BATCH]})
        if not params:
            return []

        def send(batch: dict[str, str]) -> bool:
            body = {"run_id": run_id, "params": [{"key": k, "value": v} for k, v in batch.items()]}
            return not self._call("POST", "/api/2.0/mlflow/runs/log-batch", body,
                                  ok_codes=("INVALID_PARAMETER_VALUE",)).get("error_code")

        return log_new(self.params, run_id, params, MAX_PARAMS_TAGS_PER_BATCH, send)

    def upload(self, run: RunRef, files: Sequence[tuple[Path, str]]) -> None:
        parts = urlsplit(run.artifact_uri)
        if parts.scheme == "mlflow-artifacts":  # the server proxies the artifact store
            base = f"{urlsplit(self.base).scheme}://{parts.netloc}" if parts.netloc else self.base
            for source, path in files:
                target = PurePosixPath(parts.path.lstrip("/")) / safe_artifact_path(path)
                url_path = "/api/2.0/mlflow-artifacts/artifacts/" + quote(str(target))
                self._call("PUT", url_path, data=source.read_bytes(), base=base)
        elif (root := local_root(run.artifact_uri)) is not None:  # a server on this machine, no proxy
            copy_files(root, files)
        else:
            upload_with_mlflow(self.uri, run.run_id, files)

    def reopen(self, run_id: str) -> None:  # no end_time: the server clears it
        self._call("POST", "/api/2.0/mlflow/runs/update", {"run_id": run_id, "status": "RUNNING"})

    def terminate(self, run_id: str, status: str, end_ms: int | None = None) -> None:
        self._call("POST", "/api/2.0/mlflow/runs/update",
                   {"run_id": run_id, "status": status, "end_time": end_ms or int(time.time() * 1000)})


def _seconds(text: str | None) -> float | None:
    """A Retry-After given in seconds (the form MLflow's servers and proxies send), else None."""
    try:
        return float(text) if text else None
    except ValueError:
        return None


def _json_float(value: float) -> float | str:
    """Protobuf's JSON form: NaN and infinities are strings (plain JSON has no such numbers)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return value
