"""An MLflow server through its REST API (``/api/2.0/mlflow``), with urllib only.

Authentication as MLflow's client does it: ``MLFLOW_TRACKING_TOKEN`` (bearer) or
``MLFLOW_TRACKING_USERNAME``/``PASSWORD`` (basic), ``MLFLOW_TRACKING_INSECURE_TLS`` and
``MLFLOW_TRACKING_SERVER_CERT_PATH``. Other set-ups (client certificates, auth plugins,
SigV4) are left to MLflow itself.
"""

from __future__ import annotations

import base64
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
from ._records import MAX_METRICS_PER_BATCH, MAX_PARAMS_TAGS_PER_BATCH, Metric, RunData, RunRef, TrackingError

_UNSUPPORTED = ("MLFLOW_TRACKING_CLIENT_CERT_PATH", "MLFLOW_TRACKING_AUTH", "MLFLOW_TRACKING_AWS_SIGV4",
                "MLFLOW_ENABLE_WORKSPACES", "MLFLOW_WORKSPACE")
TIMEOUT = 30.0  # seconds per request; a server that does not answer is reported, not waited on


def usable(env: Mapping[str, str]) -> bool:
    return not any(env.get(name, "").strip().lower() not in ("", "0", "false") for name in _UNSUPPORTED)


class RestStore:
    def __init__(self, uri: str, env: Mapping[str, str]) -> None:
        self.uri = uri
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
        request = urllib.request.Request(url, payload, headers, method=method)
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT, context=self.context) as response:
                raw = response.read()
        except urllib.error.HTTPError as exc:
            text = exc.read().decode("utf-8", "replace")
            try:
                error = json.loads(text)
            except ValueError:
                error = {"message": text.strip()[:300]}
            code = error.get("error_code", "")
            if code in ok_codes:
                return {"error_code": code}
            raise TrackingError(f"the MLflow server {self.base} refused {method} {path}: HTTP {exc.code} "
                                f"{code} {error.get('message', '')}".rstrip()) from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise TrackingError(f"cannot reach the MLflow server {self.base}: {reason} (is `mlflow server` "
                                "running there? or pass --no-tracking)") from None
        return json.loads(raw) if raw.strip() else {}

    # -- the Store protocol ------------------------------------------------------------------
    def experiment(self, name: str) -> str:
        for _ in range(2):  # a concurrent job may create it between our get and create
            got = self._call("GET", "/api/2.0/mlflow/experiments/get-by-name", query={"experiment_name": name},
                             ok_codes=("RESOURCE_DOES_NOT_EXIST",))
            if "experiment" in got:
                exp = got["experiment"]
                if exp.get("lifecycle_stage", "active") != "active":
                    raise TrackingError(f"experiment {name!r} is deleted on {self.base}; restore it or pick "
                                        "another with --experiment")
                return str(exp["experiment_id"])
            made = self._call("POST", "/api/2.0/mlflow/experiments/create", {"name": name},
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
        self.log(run.run_id, {}, params)
        return run

    def get_run(self, run_id: str) -> RunRef:
        got = self._call("GET", "/api/2.0/mlflow/runs/get", query={"run_id": run_id},
                         ok_codes=("RESOURCE_DOES_NOT_EXIST",))
        if "run" not in got or got["run"]["info"].get("lifecycle_stage", "active") != "active":
            raise TrackingError(f"MLflow run {run_id} does not exist (or is deleted) on {self.base}")
        info = got["run"]["info"]
        return RunRef(run_id, str(info["experiment_id"]), info.get("artifact_uri", ""), info.get("run_name", ""))

    def run_data(self, run_id: str) -> RunData:
        data = self._call("GET", "/api/2.0/mlflow/runs/get", query={"run_id": run_id})["run"].get("data", {})
        return RunData({t["key"]: t.get("value", "") for t in data.get("tags", [])},
                       {p["key"]: p.get("value", "") for p in data.get("params", [])})

    def log(self, run_id: str, tags: Mapping[str, str], params: Mapping[str, str] = {},
            metrics: Sequence[Metric] = ()) -> list[str]:
        problems = []
        for i in range(0, len(metrics), MAX_METRICS_PER_BATCH):
            points = [{"key": m.key, "value": _json_float(m.value), "timestamp": m.timestamp, "step": m.step}
                      for m in metrics[i:i + MAX_METRICS_PER_BATCH]]
            self._call("POST", "/api/2.0/mlflow/runs/log-batch", {"run_id": run_id, "metrics": points})
        items = [("tags", k, v) for k, v in tags.items()] + [("params", k, v) for k, v in params.items()]
        for i in range(0, len(items), MAX_PARAMS_TAGS_PER_BATCH):
            body: dict[str, Any] = {"run_id": run_id, "tags": [], "params": []}
            for kind, key, value in items[i:i + MAX_PARAMS_TAGS_PER_BATCH]:
                body[kind].append({"key": key, "value": value})
            got = self._call("POST", "/api/2.0/mlflow/runs/log-batch", body, ok_codes=("INVALID_PARAMETER_VALUE",))
            if got.get("error_code"):  # a param that already has another value: keep the rest
                problems.append(f"some params of run {run_id} already have other values; kept those")
        return problems

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

    def terminate(self, run_id: str, status: str) -> None:
        self._call("POST", "/api/2.0/mlflow/runs/update",
                   {"run_id": run_id, "status": status, "end_time": int(time.time() * 1000)})


def _json_float(value: float) -> float | str:
    """Protobuf's JSON form: NaN and infinities are strings (plain JSON has no such numbers)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return value
