"""Requests to an MLflow server are retried as MLflow's own client retries them: the same
environment variables and defaults, urllib3's backoff, 5xx and connection errors retried,
refusals not; and a server that never answered is given up quickly."""

from __future__ import annotations

import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Iterator

import pytest
from mlflow import MlflowClient
from urllib3.util.retry import Retry as Urllib3Retry

from distcomp.tracking import Retry, StoreUnavailable, TrackingError
from distcomp.mlstore._rest import RestStore

from ._server import free_port


def test_defaults_and_variables_are_mlflows() -> None:
    from mlflow import environment_variables as ev

    ours = Retry.from_env({})
    assert (ours.max_retries, ours.backoff_factor, ours.backoff_jitter, ours.timeout) == (
        ev.MLFLOW_HTTP_REQUEST_MAX_RETRIES.default, ev.MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR.default,
        ev.MLFLOW_HTTP_REQUEST_BACKOFF_JITTER.default, ev.MLFLOW_HTTP_REQUEST_TIMEOUT.default)
    env = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "3", "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "0.5",
           "MLFLOW_HTTP_REQUEST_BACKOFF_JITTER": "0", "MLFLOW_HTTP_REQUEST_TIMEOUT": "9",
           "MLFLOW_HTTP_RESPECT_RETRY_AFTER_HEADER": "false"}
    assert Retry.from_env(env) == Retry(3, 0.5, 0.0, 9.0, False)
    with pytest.raises(TrackingError, match=r"MLFLOW_HTTP_REQUEST_MAX_RETRIES='many': expected a whole number >= 0; "
                                            r"unset it for MLflow's default \(7\)"):
        Retry.from_env({"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "many"})


def test_backoff_is_urllib3s() -> None:
    """The waits MLflow's session (urllib3's Retry) makes, retry after retry, capped at 120 s."""
    ours = Retry(max_retries=9, backoff_factor=2, backoff_jitter=0)
    theirs = Urllib3Retry(total=9, backoff_factor=2, backoff_jitter=0)
    for n in range(1, 10):
        theirs = theirs.increment(method="POST", url="/api", error=ConnectionError("refused"))
        assert ours.delay(n) == theirs.get_backoff_time(), n
    assert Retry(backoff_jitter=0.0).delay(3, retry_after=7.0) == 7.0  # a server's Retry-After wins
    assert Retry(backoff_jitter=0.0, respect_retry_after=False).delay(3, retry_after=7.0) == 8.0


class _Gate:
    """A load balancer in front of the real server, as while its backend restarts: the first
    ``busy`` requests get 503 with Retry-After, the rest are passed on."""

    def __init__(self, backend: str, busy: int) -> None:
        self.backend, self.busy, self.seen = backend, busy, 0
        gate = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self._pass()

            def do_POST(self) -> None:
                self._pass()

            def _pass(self) -> None:
                gate.seen += 1
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0)) or None
                if gate.seen <= gate.busy:
                    self.send_response(503)
                    self.send_header("Retry-After", "0")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                request = urllib.request.Request(gate.backend + self.path, body, method=self.command,
                                                 headers={"Content-Type": "application/json"})
                try:
                    with urllib.request.urlopen(request, timeout=30) as answer:
                        status, data = answer.status, answer.read()
                except urllib.error.HTTPError as refused:  # the server's own 4xx: passed on as is
                    status, data = refused.code, refused.read()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self.http = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        self.uri = f"http://127.0.0.1:{self.http.server_port}"
        self.thread = threading.Thread(target=self.http.serve_forever, daemon=True)


@pytest.fixture
def gate(mlflow_server: str) -> Iterator[_Gate]:
    gate = _Gate(mlflow_server, busy=0)
    gate.thread.start()
    try:
        yield gate
    finally:
        gate.http.shutdown()
        gate.http.server_close()


def test_503_is_retried_until_the_server_takes_it(gate: _Gate, mlflow_server: str, tmp_path) -> None:
    store = RestStore(gate.uri, {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "4"})
    run = store.create_run(store.experiment(f"gate-{tmp_path.name}"), "r", {}, {})  # answered: full patience
    gate.busy, gate.seen = 3, 0
    store.log(run.run_id, {"t": "v"})
    assert gate.seen == 4  # three 503s, then through
    assert MlflowClient(mlflow_server).get_run(run.run_id).data.tags["t"] == "v"
    gate.busy, gate.seen = 10, 0
    with pytest.raises(StoreUnavailable, match=r"answered POST /api/2.0/mlflow/runs/log-batch with HTTP 503 "
                                               r"\(5 tries\)"):
        store.log(run.run_id, {"t": "w"})
    assert gate.seen == 5


def test_a_refusal_is_not_retried(gate: _Gate, tmp_path) -> None:
    store = RestStore(gate.uri, {})
    exp = store.experiment(f"refusal-{tmp_path.name}")
    gate.seen = 0
    with pytest.raises(TrackingError, match="refused POST /api/2.0/mlflow/runs/create: HTTP 404") as caught:
        store.create_run(str(10**9), "r", {}, {})  # no such experiment
    assert not isinstance(caught.value, StoreUnavailable) and gate.seen == 1 and exp


def test_a_server_that_never_answered_is_given_up_in_seconds() -> None:
    store = RestStore(f"http://127.0.0.1:{free_port()}", {})  # MLflow's patience: ~4 minutes
    start = time.monotonic()
    with pytest.raises(StoreUnavailable, match=r"cannot reach the MLflow server .*Connection refused \(3 tries; "
                                               r"is `mlflow server` running there\? or pass --no-tracking\)"):
        store.experiment("e")
    assert time.monotonic() - start < 60  # liveness, not speed: the full policy would take minutes
