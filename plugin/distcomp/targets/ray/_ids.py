"""Where this machine remembers the Ray jobs it submitted: by Jobs API address and id.

``$XDG_STATE_HOME/distcomp/ray/HASH/ID`` (HASH: the address's) holds the address job ID was
submitted to and what the submit told the Jobs API of it (its component, its MLflow run), so
``distcomp status|logs|cancel ray:ID`` find the cluster from any shell, and use a job found
there only if it is the one submitted: a cluster set up again at the same address may hold
another job of that id. A job submitted elsewhere is asked at ``$RAY_ADDRESS``.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any, Mapping

from ...errors import UsageError

_ID = re.compile(r"^[A-Za-z0-9_.-]+\Z")
CHECKED = ("distcomp_component", "mlflow_run_id")  # the submit's metadata that names the job


def index_dir() -> Path:
    state = os.environ.get("XDG_STATE_HOME", "").strip() or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(os.path.abspath(state)) / "distcomp" / "ray"


def _entry(address: str, job_id: str) -> Path:
    return index_dir() / hashlib.sha256(address.encode("utf-8")).hexdigest()[:16] / job_id


def progress_folder(address: str, job_id: str) -> Path:
    """Where the ranks of job ``job_id`` beat (``agent.progress``), beside its entry: this
    machine's, so ``distcomp status`` reads it; the ranks write it only where their nodes share
    this machine's files (else the job shows no progress, and runs as it would)."""
    return _entry(address, job_id).with_name(job_id + ".progress")


def remember(job_id: str, address: str, metadata: Mapping[str, str]) -> None:
    path = _entry(address, job_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {"address": address, "job": job_id, "metadata": {k: str(metadata.get(k, "")) for k in CHECKED}}
    path.write_text(json.dumps(data) + "\n", encoding="utf-8")


def _entries(job_id: str) -> list[dict[str, Any]]:
    """This machine's entries for id ``job_id``, newest first (one per address it went to)."""
    found = []
    for path in index_dir().glob(f"*/{job_id}"):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            mtime = path.stat().st_mtime
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and data.get("job") == job_id and isinstance(data.get("address"), str):
            found.append((mtime, data))
    return [data for _t, data in sorted(found, key=lambda f: -f[0])]


def job_address(job_id: str) -> str:
    """The address job ``job_id`` went to (this machine's index: the one ``$RAY_ADDRESS`` names
    if it went to several), else ``$RAY_ADDRESS``."""
    from ._client import address_of

    if not _ID.match(job_id):
        raise UsageError(f"{job_id!r} is not a Ray job id (as `distcomp submit --target ray` printed it: ray:ID)")
    given = address_of({}) if os.environ.get("RAY_ADDRESS", "").strip() else ""
    entries = _entries(job_id)
    if entries:
        return next((e["address"] for e in entries if e["address"] == given), entries[0]["address"])
    if not given:
        raise UsageError(f"Ray job {job_id} was not submitted from this machine and RAY_ADDRESS is not set: set it to "
                         "the cluster's Jobs API URL")
    return given


def check(job_id: str, address: str, info: Any) -> None:
    """A UsageError unless the Jobs API's job ``job_id`` at ``address`` is the one submitted from
    here to that address (its metadata as the submit gave it); a job submitted elsewhere passes."""
    try:
        data = json.loads(_entry(address, job_id).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    want = data.get("metadata") if isinstance(data, dict) else None
    if not isinstance(want, dict):
        return
    have = getattr(info, "metadata", None) or {}
    differ = [k for k in CHECKED if str(want.get(k, "")) != str(have.get(k, ""))]
    if differ:
        raise UsageError(f"Ray job {job_id} at {address} is not the job distcomp submitted there as ray:{job_id} (its "
                         f"{', '.join(differ)} differ: the cluster was set up again, or another client reused the "
                         "id); this machine knows no other job of that id there")
