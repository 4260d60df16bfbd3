"""A JSON-speaking request handler: the base of the test servers that answer as the
Kubernetes API does."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self


class JsonHandler(BaseHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:  # quiet: the tests assert on what was asked
        pass

    def _send(self, code: int, body: Any, ctype: str = "application/json") -> None:
        data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class FakeKube:
    """A stand-in for the Kubernetes API on 127.0.0.1: ``handler`` answers in a thread while the
    ``with`` block runs; ``client()`` is the real kubernetes client pointed at it."""

    def __init__(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)

    def __enter__(self) -> Self:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()

    def client(self) -> Any:
        from kubernetes import client as k8s

        config = k8s.Configuration()
        config.host = f"http://127.0.0.1:{self.server.server_address[1]}"
        return k8s.ApiClient(config)
