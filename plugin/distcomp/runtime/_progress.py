"""``runtime.progress(step)``: this rank's heartbeat (``distcomp.agent.progress``). Every
``log_metric(s)`` call beats too. Nothing happens outside a distcomp job (no progress folder)."""

from __future__ import annotations

import atexit
import os

from ..agent.progress import PROGRESS_ENV, Beats, rank_name

_beats: list[Beats | None] = []  # made on the first beat of this process: [] not yet, [None] no folder


def _mine() -> Beats | None:
    if not _beats:
        folder = os.environ.get(PROGRESS_ENV, "")
        beats = Beats(folder, rank_name(os.environ), os.environ.get("DISTCOMP_RESTART_COUNT", "0")) if folder else None
        if beats is not None:  # the last step, kept within its second, is written as the rank leaves
            atexit.register(beats.flush)
        _beats.append(beats)
    return _beats[0]


def flush() -> None:
    """Write this rank's last beat now, if one is kept (``runtime.finish``, before ``os._exit``)."""
    if _beats and _beats[0] is not None:
        _beats[0].flush()


def progress(step: int | None = None) -> None:
    """Say this rank is making progress (at ``step``): ``distcomp status`` shows each rank's last
    step and how long ago it came. Cheap enough for every step: written at most once a second."""
    beats = _mine()
    if beats is not None:
        beats.beat(step)


def beat(step: int | None, metric: tuple[str, float] | None = None) -> None:
    """A metric call's heartbeat (``log_metric(s)``, MLflow's through the hook), with the
    metric it logged (its first, for several): the live line shows rank 0's."""
    beats = _beats[0] if _beats else _mine()
    if beats is not None:
        beats.beat(step, metric)
