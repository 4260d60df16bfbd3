"""A local job watched for hangs (``--hang-timeout``, the plan's ``hang_timeout``): each rank's
env gets the stacks folder and the site hook (``distcomp.agent.hang.rank_env``), the supervision
loop watches the run folder's beats, and a stall becomes the attempt's root cause: the rank not
inside a collective, with the report (where every rank is) as its detail."""

from __future__ import annotations

import dataclasses
import signal
from pathlib import Path
from typing import TYPE_CHECKING

from ...records import Failure
from ._output import Logs
from ._prepare import Launch

if TYPE_CHECKING:  # the watch's module is imported by a run that asks for one (~3 ms)
    from ...agent import hang
    from ...agent.hang import Watch as Watch


def watch(timeout: float | None, run_dir: Path, beats: Path,
          launches: tuple[Launch, ...]) -> tuple[tuple[Launch, ...], hang.Watch | None]:
    """The launches with the hook in their env, and the watch; as they were, and None, when off."""
    if timeout is None:
        return launches, None
    from ...agent import hang

    stacks = run_dir / hang.FOLDER  # each rank's stack file
    hang.clear(str(stacks))  # this attempt's stacks only
    out = tuple(dataclasses.replace(launch, env=hang.rank_env(launch.env, str(stacks), str(beats)))
                for launch in launches)
    return out, hang.Watch(timeout, str(beats), str(stacks))


def failure(stall: hang.Stall, logs: Logs, processes_per_node: int, after: float) -> Failure:
    """The root cause of a hung attempt: the rank it names, stopped by distcomp (SIGTERM)."""
    name = stall.blamed
    pid = next((s.pid for s in stall.stacks if s.name == name), None)
    rank = int(name[4:]) if name.startswith("rank") and name[4:].isdigit() else 0
    tail = tuple(logs.tails.get(name) or ())
    return Failure(name, "rank", rank // max(1, processes_per_node), -signal.SIGTERM, logs.path(name), tail, pid,
                   after, stall.describe().replace("\n", "\n  "), hung=True)
