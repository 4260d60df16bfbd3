"""The node agent's part in finding a stalled job (the record's ``hang_timeout``): its replicas
get the stacks folder and the site hook, its supervision loop watches the job's beats (the job
folder's progress/, shared by every node), and a stall is reported as the job's root cause in
``exits/rankN.json`` by the node that runs the rank to blame (``hang.blame``)."""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any, Callable, Iterable, Mapping

from . import hang, progress
from .shared import write_atomic


def watch(record: Mapping[str, Any], folder: str, environ: Mapping[str, str], attempt: int,
          host: str) -> hang.Watch | None:
    """The watch of this attempt's beats, where the record asks for one; ``host``: the node's name."""
    timeout = hang.timeout_of(record)
    if timeout is None:
        return None
    beats = environ.get(progress.PROGRESS_ENV) or os.path.join(folder, progress.FOLDER)
    # the stacks meet where the beats do: beside them in a job folder every node shares (Slurm's),
    # else in the beats' own folder (Ray's, on the submitting machine), not in this node's folder
    inside = os.path.dirname(os.path.abspath(beats)) == os.path.abspath(folder)
    stacks = os.path.join(folder if inside else beats, hang.FOLDER)
    return hang.Watch(timeout, beats, stacks, attempt=str(attempt), host=host)


def rank_env(watched: hang.Watch | None, env: Mapping[str, str]) -> dict[str, str]:
    """A replica's env: the stacks folder, the site hook and the beats folder, when watched."""
    return dict(env) if watched is None else hang.rank_env(env, watched.stacks, watched.beats, watched.host)


def report(stall: hang.Stall, mine: set[int], node: int, host: str, exits: str, per_node: int,
           tail: Callable[[str], Iterable[str]], mask: Callable[[str], str]) -> None:
    """Tell the stall on stderr, and write the root cause (``hang.blame``): ``exits/rankN.json``,
    of the node that runs it (``per_node`` ranks a node)."""
    text = stall.describe()
    print(f"distcomp agent: node {node}: " + mask(text).replace("\n", "\n  "), file=sys.stderr, flush=True)
    blamed = hang.blame(stall, mine, node == 0, host)
    if blamed is None:
        return
    rank = int(blamed.name[4:]) if blamed.name[4:].isdigit() else 0
    data = {"name": blamed.name, "role": "rank", "index": rank, "rank": rank, "node": rank // max(1, per_node),
            "host": blamed.host or host,
            "exit_code": None, "signal": None, "failed": True, "stopped": False, "service": False,
            "ended": time.time(), "pid": blamed.pid, "error": mask(text.splitlines()[0]), "hang": mask(text),
            "tail": [mask(line) for line in tail(blamed.name)]}
    os.makedirs(exits, exist_ok=True)
    write_atomic(os.path.join(exits, f"{blamed.name}.json"), json.dumps(data, indent=1) + "\n")
