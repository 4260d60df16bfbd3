"""The cluster's Jobs API: its address, and a client that says in one line why it cannot be
had (which address each job went to: ``_ids``).
"""

from __future__ import annotations

import json
import logging
import os
import re
import shlex
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import TYPE_CHECKING, Any, Iterator, Mapping

from ...errors import UsageError

if TYPE_CHECKING:
    from ray.job_submission import JobSubmissionClient

MIN_VERSION = (2, 9)  # the Jobs API with submission ids and stop/tail as used here
_WORD = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]*")  # python, python3.11, pypy3
_PATH = re.compile(r"[^\s\x00-\x1f\x7f-][^\s\x00-\x1f\x7f]*")  # one path: quoted in the entrypoint, so any other character is a file name's


def address_of(options: Mapping[str, Any]) -> str:
    """``--address``, else ``$RAY_ADDRESS``: the Jobs API's URL (http://HOST:PORT)."""
    address = str(options.get("address") or os.environ.get("RAY_ADDRESS", "")).strip()
    if not address:
        raise UsageError("no Ray cluster given: pass --address http://HOST:8265 (its Jobs API, the dashboard's port) "
                         "or set RAY_ADDRESS")
    if "://" not in address:
        address = "http://" + address
    if not address.startswith(("http://", "https://")) or not _url_ok(address):
        raise UsageError(f"--address {address!r}: give the Jobs API's URL, http://HOST:PORT (the dashboard's port)")
    return address.rstrip("/")


def python_of(options: Mapping[str, Any]) -> str:
    """``--python``, the cluster's interpreter that runs the driver (default ``python``), as one
    word of the entrypoint's shell text: a command name or a path, never more shell."""
    python = str(options.get("python") or "python")
    if not (_WORD.fullmatch(python) or ("/" in python and _PATH.fullmatch(python))):
        raise UsageError(f"--python {python!r}: give the cluster's Python interpreter as one command name (python3) "
                         "or one path (/opt/conda/bin/python), nothing more")
    return shlex.quote(python)


def _url_ok(address: str) -> bool:
    """A URL urllib and Ray's client can open: a host, a port that is a number, and no space or
    control character anywhere (``http://a b`` is http.client's InvalidURL, not an address)."""
    if any(c.isspace() or ord(c) < 0x20 or c == "\x7f" for c in address):
        return False
    try:
        parts = urllib.parse.urlsplit(address)
        parts.port  # noqa: B018 -- raises ValueError for a port that is not a number in range
    except ValueError:
        return False
    return bool(parts.hostname)


def check(address: str) -> str:
    """The cluster's Ray version, or a UsageError: nothing answers there, or its Ray is too old."""
    try:
        with urllib.request.urlopen(address + "/api/version", timeout=10) as r:
            data = json.loads(r.read().decode("utf-8"))
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", None) or exc
        raise UsageError(f"no Ray Jobs API at {address} ({reason}); start the cluster (ray start --head) and give "
                         "its dashboard's URL with --address or RAY_ADDRESS") from None
    version = str(data.get("ray_version", "")) if isinstance(data, dict) else ""
    numbers = tuple(int(p) for p in re.findall(r"\d+", version)[:2])
    if len(numbers) < 2 or numbers < MIN_VERSION:
        raise UsageError(f"the Ray cluster at {address} runs Ray {version or 'of unknown version'}; the ray target "
                         f"needs Ray {'.'.join(map(str, MIN_VERSION))} or newer there")
    return version


def client(address: str) -> "JobSubmissionClient":
    """A Jobs API client (the cluster checked first, so a bad address is one clear line)."""
    check(address)
    from ray.job_submission import JobSubmissionClient

    try:
        return JobSubmissionClient(address)
    except (ConnectionError, RuntimeError) as exc:
        raise UsageError(f"cannot reach the Ray Jobs API at {address}: {str(exc).splitlines()[0]}") from None


def info(c: Any, job_id: str, address: str) -> Any:
    """The Jobs API's record of the job, or a UsageError: the cluster does not know it
    (``c``: Ray's client, or ``_http.Client``, which answers the same)."""
    try:
        return c.get_job_info(job_id)
    except RuntimeError as exc:
        if "404" in str(exc) or "does not exist" in str(exc) or "not found" in str(exc).lower():
            raise UsageError(f"no Ray job {job_id!r} at {address} (give the id `distcomp submit --target ray` "
                             "printed)") from None
        raise


def lost_driver(address: str, job: Any) -> str:
    """Why the job cannot be running though the Jobs API says so: the node its driver ran on
    (the head) is dead, and the driver with it; "" while that node lives or cannot be asked."""
    node = str(getattr(job, "driver_node_id", "") or "")
    if not node:
        return ""
    query = urllib.parse.urlencode({"limit": 1000, "filter_keys": "node_id", "filter_predicates": "=",
                                    "filter_values": node})
    try:
        with urllib.request.urlopen(f"{address}/api/v0/nodes?{query}", timeout=10) as r:
            rows = json.loads(r.read().decode("utf-8"))["data"]["result"]["result"]
    except (urllib.error.URLError, OSError, ValueError, KeyError, TypeError):
        return ""
    if not any(row.get("node_id") == node and row.get("state") == "DEAD" for row in rows):
        return ""
    return (f"the head node, where the job's driver ran ({getattr(job.driver_info, 'node_ip_address', '?')}, Ray "
            f"node {node[:12]}), was lost, and the driver with it: the Jobs API still calls the job "
            f"{getattr(job.status, 'value', job.status)}, but nothing runs it")


AGENT_WAIT = 60.0  # a cluster just started: its job agent registers a little after the API answers


def submit(c: "JobSubmissionClient", address: str, **request: Any) -> str:
    """``submit_job(**request)``; Ray's refusals as one line, a job agent not up yet waited for."""
    deadline = time.monotonic() + AGENT_WAIT
    previous = logging.root.manager.disable
    logging.disable(logging.INFO)  # Ray's INFO line per upload: the target says what it did
    try:
        while True:
            try:
                return str(c.submit_job(**request))
            except (RuntimeError, ValueError) as exc:  # a package too big, a bad runtime_env, no agent yet
                text = str(exc)
                if "No available agent" in text and time.monotonic() < deadline:
                    time.sleep(1.0)
                    continue
                raise UsageError(f"the Ray cluster at {address} refused the job: {text.splitlines()[0]}") from None
    finally:
        logging.disable(previous)


def tail(c: "JobSubmissionClient", job_id: str, address: str) -> Iterator[str]:
    """The job's log in chunks as the driver writes it, from its beginning, until the job ends
    (the Jobs API's websocket); a stream cut before the end is a JobError saying what to do."""
    import asyncio

    from ...errors import JobError

    loop = asyncio.new_event_loop()
    stream = c.tail_job_logs(job_id)
    try:
        while True:
            try:
                yield loop.run_until_complete(stream.__anext__())
            except StopAsyncIteration:
                return
            except (RuntimeError, OSError) as exc:
                raise JobError(f"Ray job {job_id}: the log stream from {address} broke ({str(exc).splitlines()[0]}); "
                               f"`distcomp logs ray:{job_id}` shows what the job wrote so far") from None
    finally:
        loop.run_until_complete(stream.aclose())  # type: ignore[attr-defined]
        loop.close()
