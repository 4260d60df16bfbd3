"""A Slurm job's attempts, kept in its job folder (``attempts.json``) by its batch script:
``python -m distcomp.targets.slurm._attempts begin|failed|preempted FOLDER [ARG]``.

One monotonic counter per job: every start of the node agents is an attempt, whether the batch
script started them again after a failure (inside the allocation) or Slurm ran the script again
after a requeue (its own after a preemption notice, ``scontrol requeue``, a lost node). The
count is the ranks' ``restart_count()``; ``SLURM_RESTART_COUNT`` tells a requeue. Failures are
counted apart, against ``max_restarts``; a requeue or a preemption never uses one up. Each
restart's cause is appended to the record (``distcomp status`` and the MLflow run's
``distcomp.restart.N`` tags read it). Only the batch script writes the record, one attempt at a
time (on the job's first node); anyone may read it. Standard library only, quick to start: the
record of a failed attempt, on the way to the job's end, imports none of the agent's modules.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
import time
from pathlib import Path
from typing import Any, Mapping

FILE = "attempts.json"
CHECKPOINT = "checkpoint"  # the job's checkpoint folder, in its job folder
EXITS = "exits"
RESTARTS_LEFT = "DISTCOMP_RESTARTS_LEFT"  # a shell variable of the batch script, set by ``begin``
REQUEUED = ("requeued by Slurm while it ran (scontrol requeue, a preemption without notice, or a node "
            "that was lost)")


def read(folder: Path) -> dict[str, Any]:
    """The job's record of attempts ({} before its first)."""
    try:
        data = json.loads((folder / FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def causes(folder: Path) -> list[str]:
    """Why each attempt after the first started, in order."""
    found = read(folder).get("causes")
    return [str(c) for c in found] if isinstance(found, list) else []


def _write(folder: Path, data: Mapping[str, Any]) -> None:
    tmp = folder / f".{FILE}.tmp"
    tmp.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    os.replace(tmp, folder / FILE)


def begin(folder: Path, max_restarts: int, environ: Mapping[str, str]) -> str:
    """Start the next attempt: its number and its cause recorded, the last one's exit records
    put aside (``exits/attempt-N``), the last one's beats cleared; the shell lines that export
    what its agents need."""
    from ...agent.longjob import CHECKPOINT_ENV, NOTICE_ENV, RESTART_ENV, notice_file
    from ...agent.progress import FOLDER as PROGRESS, PROGRESS_ENV, clear as clear_beats

    data = read(folder)
    slurm = environ.get("SLURM_RESTART_COUNT", "0")
    slurm_count = int(slurm) if slurm.isdigit() else 0
    if not data:
        attempt, data = 0, {"attempt": 0, "failures": 0, "causes": []}
    else:
        attempt = int(data.get("attempt", 0)) + 1
        cause = data.get("pending") or (f"attempt {attempt} {REQUEUED}{_silent(folder)}" if data.get("running")
                                        else f"attempt {attempt} ended and the job started again")
        data["causes"] = [*data.get("causes", []), str(cause)]
        _put_aside(folder / EXITS, attempt - 1)
    data.update(attempt=attempt, max_restarts=max_restarts, running=True, pending=None, slurm_restarts=slurm_count,
                begun=[*data.get("begun", []), time.time()])  # when each attempt began (time.time())
    _write(folder, data)
    # every rank beats into the job folder's progress/ (``distcomp status``, a waiting submit's live
    # line), this attempt's beats only
    clear_beats(str(folder / PROGRESS))
    env = {RESTART_ENV: str(attempt), NOTICE_ENV: notice_file(str(folder), attempt),
           CHECKPOINT_ENV: str(folder / CHECKPOINT), PROGRESS_ENV: str(folder / PROGRESS)}
    # the script's own (not exported): with none left, a failure is recorded while the nodes are swept
    left = max(0, max_restarts - int(data.get("failures", 0)))
    return "".join(f"export {k}={shlex.quote(v)}\n" for k, v in env.items()) + f"{RESTARTS_LEFT}={left}\n"


def _silent(folder: Path) -> str:
    """The nodes of the job none of whose replicas reported an end: Slurm stopped every node it
    reached (its agents report what they stop), so a node that said nothing was likely lost."""
    try:
        replicas = json.loads((folder / "node.json").read_text(encoding="utf-8"))["replicas"]
    except (OSError, ValueError, KeyError, TypeError):
        return ""
    reported = {p.stem for p in (folder / EXITS).glob("*.json")}
    nodes = sorted({int(r["node"]) for r in replicas if not r.get("service")})
    silent = [n for n in nodes if not any(r["name"] in reported for r in replicas if r["node"] == n)]
    if not silent or len(silent) == len(nodes):  # all silent: nothing tells them apart
        return ""
    return f"; no end was reported from node(s) {', '.join(map(str, silent))} of the job: lost?"


def _put_aside(exits: Path, attempt: int) -> None:
    """The exit records of ``attempt`` into their own folder: the next attempt's agents report
    afresh (a service stops once the others' records are there)."""
    records = list(exits.glob("*.json"))
    if not records:
        return
    into = exits / f"attempt-{attempt}"
    into.mkdir(exist_ok=True)
    for path in records:
        os.replace(path, into / path.name)


def failed(folder: Path, code: int) -> bool:
    """The attempt failed (its agents' step exited with ``code``): whether a restart is left
    (then its cause is recorded for the next attempt)."""
    data = read(folder)
    attempt, used, most = int(data.get("attempt", 0)), int(data.get("failures", 0)), int(data.get("max_restarts", 0))
    data["running"] = False
    why = f"attempt {attempt + 1} failed: {first_failure(folder / EXITS) or f'the node agents exited with {code}'}"
    if used >= most:
        _write(folder, data)
        print(f"distcomp: {why}; no restart left ({used} of {most} used)", file=sys.stderr)
        return False
    data.update(failures=used + 1, pending=why)
    _write(folder, data)
    print(f"distcomp: {why}; restarting every rank on every node (restart {used + 1} of {most})", file=sys.stderr)
    return True


def preempted(folder: Path) -> None:
    """The attempt left on notice (its notice file exists): the job requeues itself."""
    from ...agent.longjob import notice_file

    data = read(folder)
    attempt = int(data.get("attempt", 0))
    said = _first_line(Path(notice_file(str(folder), attempt)))
    data.update(running=False, pending=f"attempt {attempt + 1} preempted: notice given ({said}); the ranks left "
                                       "and the job requeued itself")
    _write(folder, data)


def _first_line(path: Path) -> str:
    try:
        line = path.read_text(encoding="utf-8").splitlines()[0]
    except (OSError, IndexError):
        return "no reason written"
    _when, _, why = line.partition(" ")
    return why or line


def first_failure(exits: Path) -> str:
    """The first replica that failed by itself, as its agent reported it: name, node, how."""
    failures = []
    for path in exits.glob("*.json"):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and data.get("failed") and not data.get("stopped"):
            failures.append((float(data.get("ended") or 0), path.stem, data))
    if not failures:
        return ""
    _t, name, data = min(failures, key=lambda f: (f[0], f[1]))
    how = (f"was killed by signal {data['signal']}" if data.get("signal")
           else f"exited with code {data.get('exit_code')}")
    return f"{name} (node {data.get('host', data.get('node'))}) {how}"


def main(argv: list[str]) -> int:
    if len(argv) < 2 or argv[0] not in ("begin", "failed", "preempted"):
        print("usage: python -m distcomp.targets.slurm._attempts begin|failed|preempted FOLDER [ARG]", file=sys.stderr)
        return 2
    folder = Path(argv[1])
    if argv[0] == "begin":
        sys.stdout.write(begin(folder, int(argv[2]) if len(argv) > 2 else 0, os.environ))
        return 0
    if argv[0] == "failed":
        return 0 if failed(folder, int(argv[2]) if len(argv) > 2 else 1) else 1
    preempted(folder)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
