"""The refusals of the Jobs API's client, against real HTTP servers on 127.0.0.1 that are not a
usable Ray: one that runs a Ray too old, one that is no Ray at all. Each is one line, exit 2,
before any MLflow run exists."""

from __future__ import annotations

import http.server
import json
import threading
from pathlib import Path
from typing import Iterator

import pytest

from .conftest import TORCH, distcomp, one_line, ray_env


def _serve(body: bytes, status: int = 200) -> Iterator[str]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def old_ray() -> Iterator[str]:
    yield from _serve(json.dumps({"ray_version": "2.5.1", "version": "4"}).encode())


@pytest.fixture
def not_ray() -> Iterator[str]:
    yield from _serve(b"<html>hello</html>")


def test_a_ray_too_old_is_refused_in_one_line(old_ray: str, tmp_path: Path) -> None:
    proc = distcomp(ray_env(old_ray, tmp_path), "submit", str(TORCH), "--target", "ray", "--nodes", "2",
                    "--output", f"result={tmp_path / 'out'}", cwd=tmp_path)
    one_line(proc, f"the Ray cluster at {old_ray} runs Ray 2.5.1", "needs Ray 2.9 or newer")
    assert not (tmp_path / "mlflow.db").exists()


def test_a_server_that_is_no_ray_is_refused_in_one_line(not_ray: str, tmp_path: Path) -> None:
    proc = distcomp(ray_env(not_ray, tmp_path), "status", "ray:some-job")
    one_line(proc, f"no Ray Jobs API at {not_ray}")
