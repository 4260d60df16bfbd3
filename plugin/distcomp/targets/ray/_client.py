"""The cluster's Jobs API: its address, a client that says in one line why it cannot be had,
and where this machine remembers which address each job went to.

``$XDG_STATE_HOME/distcomp/ray/ID`` holds the address job ID was submitted to, so ``distcomp
status|logs|cancel ray:ID`` find it from any shell; a job submitted elsewhere is asked at
``$RAY_ADDRESS``.
"""

from __future__ import annotations

import json
import logging
import os
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Mapping

from ...errors import UsageError

if TYPE_CHECKING:
    from ray.job_submission import JobSubmissionClient

MIN_VERSION = (2, 9)  # the Jobs API with submission ids and stop/tail as used here
_ID = re.compile(r"^[A-Za-z0-9_.-]+\Z")


def index_dir() -> Path:
    state = os.environ.get("XDG_STATE_HOME", "").strip() or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(os.path.abspath(state)) / "distcomp" / "ray"


def address_of(options: Mapping[str, Any]) -> str:
    """``--address``, else ``$RAY_ADDRESS``: the Jobs API's URL (http://HOST:PORT)."""
    address = str(options.get("address") or os.environ.get("RAY_ADDRESS", "")).strip()
    if not address:
        raise UsageError("no Ray cluster given: pass --address http://HOST:8265 (its Jobs API, the dashboard's port) "
                         "or set RAY_ADDRESS")
    if "://" not in address:
        address = "http://" + address
    if not address.startswith(("http://", "https://")):
        raise UsageError(f"--address {address!r}: give the Jobs API's URL, http://HOST:PORT (the dashboard's port)")
    return address.rstrip("/")


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


def remember(job_id: str, address: str) -> None:
    folder = index_dir()
    folder.mkdir(parents=True, exist_ok=True)
    (folder / job_id).write_text(address + "\n", encoding="utf-8")


def job_address(job_id: str) -> str:
    """The address job ``job_id`` went to (this machine's index), else ``$RAY_ADDRESS``."""
    if not _ID.match(job_id):
        raise UsageError(f"{job_id!r} is not a Ray job id (as `distcomp submit --target ray` printed it: ray:ID)")
    try:
        return (index_dir() / job_id).read_text(encoding="utf-8").strip()
    except OSError:
        pass
    if not os.environ.get("RAY_ADDRESS", "").strip():
        raise UsageError(f"Ray job {job_id} was not submitted from this machine and RAY_ADDRESS is not set: set it to "
                         "the cluster's Jobs API URL")
    return address_of({})


def info(c: "JobSubmissionClient", job_id: str, address: str) -> Any:
    """The Jobs API's record of the job, or a UsageError: the cluster does not know it."""
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
