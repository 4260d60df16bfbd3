"""What a rank could not deliver before it ended, kept on disk in the run folder until the store
takes it: ``RUN_DIR/tracking/pending-PID-*.jsonl``, one item a line, in the order it was logged.

The lines are the rank's backlog lines (``distcomp.runtime._backlog``): ``{"m": [[key, value,
timestamp, step], ...]}`` (a metric batch), ``{"p": {key: value}}`` (params) and ``{"a":
[staged, artifact_path, is_dir, staging_dir, files]}`` (an artifact, its copy kept beside the
file). The launcher sends them before it ends the run; when the store does not answer, ``distcomp
status|reap RUN_DIR`` sends them later. A file is rewritten with what is left when the store goes
away midway, so a later try neither loses nor repeats much (a repeated metric point is stored once
by MLflow and by the SQLite writer).
"""

from __future__ import annotations

import json
import os
import posixpath
import shutil
from pathlib import Path
from typing import Any

from ..base.files import write_atomic
from ._delivery import Counts
from ._records import Metric, RunRef, StoreUnavailable, TrackingError

PREFIX = "pending-"  # pending-PID-XXXX.jsonl, and its artifacts' copies in pending-PID-XXXX.files/


def files(folder: Path) -> list[Path]:
    """The pending files in ``folder``, oldest first."""
    found = [p for p in folder.glob(f"{PREFIX}*.jsonl") if p.is_file()] if folder.is_dir() else []
    return sorted(found, key=lambda p: (p.stat().st_mtime_ns, p.name))


def line_counts(line: str) -> Counts:
    data = json.loads(line)
    if "a" in data:
        return Counts(artifacts=int(data["a"][4]))
    if "p" in data:
        return Counts(params=len(data["p"]))
    return Counts(metrics=len(data["m"]))


def count(folder: Path) -> Counts:
    """What waits in ``folder``'s pending files (a line that cannot be read is not counted)."""
    total = Counts()
    for path in files(folder):
        for line in _lines(path):
            try:
                total += line_counts(line)
            except (ValueError, KeyError, IndexError, TypeError):
                pass
    return total


def artifact_files(staged: str, artifact_path: str | None, is_dir: bool) -> list[tuple[Path, str]]:
    """Each file of a staged artifact and its path in the run."""
    prefix = posixpath.join(artifact_path, "") if artifact_path else ""
    if not is_dir:
        return [(Path(staged), prefix + os.path.basename(staged))]
    return [(Path(root, name), prefix + posixpath.join(*os.path.relpath(os.path.join(root, name), staged).split(os.sep)))
            for root, _dirs, names in os.walk(staged) for name in sorted(names)]


def deliver(store: Any, run: RunRef, folder: Path) -> tuple[Counts, Counts, list[str]]:
    """Send every pending item in ``folder`` to ``run``, in order, removing what was sent; returns
    (delivered, refused, problems). Raises StoreUnavailable when the store stops answering: what
    is left stays on disk for the next try."""
    delivered, refused, problems = Counts(), Counts(), []
    for path in files(folder):
        lines = _lines(path)
        for i, line in enumerate(lines):
            try:
                data, size = json.loads(line), line_counts(line)
            except (ValueError, KeyError, IndexError, TypeError):
                problems.append(f"{path}: line {i + 1} cannot be read; skipped")
                continue
            try:
                _send(store, run, data)
            except StoreUnavailable:
                if i:
                    born = path.stat()
                    write_atomic(path, "".join(f"{rest}\n" for rest in lines[i:]), mode=0o600)
                    os.utime(path, ns=(born.st_atime_ns, born.st_mtime_ns))  # keeps its place in the order
                raise
            except (TrackingError, OSError, ValueError, KeyError, IndexError, TypeError) as exc:
                refused += size  # refused for good (a bad value, a deleted run): counted, not retried
                problems.append(f"MLflow run {run.run_id}: could not deliver what waited in {path}: {exc}")
            else:
                delivered += size
        path.unlink(missing_ok=True)
        shutil.rmtree(path.with_suffix(".files"), ignore_errors=True)
    return delivered, refused, problems


def _lines(path: Path) -> list[str]:
    try:
        return [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    except OSError:
        return []


def _send(store: Any, run: RunRef, data: dict[str, Any]) -> None:
    if "a" in data:
        staged, artifact_path, is_dir = data["a"][:3]
        store.upload(run, artifact_files(staged, artifact_path, bool(is_dir)))
    elif "p" in data:
        store.log(run.run_id, {}, {str(k): str(v) for k, v in data["p"].items()})
    else:
        store.log(run.run_id, {}, metrics=[Metric(str(k), float(v), int(t), int(s)) for k, v, t, s in data["m"]])

