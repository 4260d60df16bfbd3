"""A restarted pod's side of issue 36's contract: where the checkpoint lasts, and which attempt
this is (``_lifecycle`` makes the operator restart the pods).

The checkpoint is on the first ``--volume``, which every pod mounts and which outlives them:
``MOUNT/distcomp/JOB/checkpoint``, named by ``DISTCOMP_CHECKPOINT_DIR`` in every pod. Kubernetes
tells a container nothing of its restarts (the downward API has no restart count), so a pod that
may restart counts its own starts in a file beside the checkpoint (``MOUNT/distcomp/JOB/starts/POD``,
the pod's name being its ``HOSTNAME``, the same after a restart in place or the operator's
re-creation): one shell line before the command reads it, writes it one higher and exports
``DISTCOMP_RESTART_COUNT``. An elastic job's ranks read torchrun's ``TORCHELASTIC_RESTART_COUNT``.
"""

from __future__ import annotations

import posixpath
import shlex
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping

from ...agent.longjob import CHECKPOINT_ENV, MAX_RESTARTS_ENV, RESTART_ENV
from ._pod import escape

if TYPE_CHECKING:
    from ._lifecycle import Lifecycle

ARG0 = "distcomp-attempt"  # $0 of the counting line, as ps shows it
_COUNT = ('s={starts}; f="$s/$HOSTNAME"; mkdir -p "$s" && n=$(cat "$f" 2>/dev/null || echo 0) && '
          'echo $((n + 1)) > "$f" && export {env}="$n" && exec "$@"')


@dataclass(frozen=True)
class RestartPlan:
    max_restarts: int  # the Plan's
    restarting: bool  # the job's pods (or an elastic job's torchrun) start again after a failure
    counted: bool  # each pod counts its starts on the volume (the counting line before its command)
    checkpoint: str | None = None  # the folder in the pods, on the first volume
    claim: str | None = None  # that volume's claim
    starts: str | None = None  # the folder of the pods' start counts

    def env(self) -> dict[str, str]:
        """What every pod gets (the counting line sets the restart count itself)."""
        if not self.restarting:
            return {}
        env = {MAX_RESTARTS_ENV: str(self.max_restarts)}
        if self.checkpoint:
            env[CHECKPOINT_ENV] = self.checkpoint
        if self.counted:  # named here so that an MPIJob's mpirun forwards it (-x) to the ranks
            env[RESTART_ENV] = "0"
        return env

    def notes(self) -> tuple[str, ...]:
        if not self.restarting:
            return ()
        if self.checkpoint:
            return (f"checkpoint: pvc {self.claim}:{self.checkpoint} ({CHECKPOINT_ENV} in every pod), kept across "
                    "restarts",)
        return (f"warning: the job restarts after a failure (up to {self.max_restarts} times) but has no --volume: a "
                "restarted pod finds no checkpoint and starts from the beginning, and its ranks' restart count stays "
                "0; give --volume CLAIM:/PATH (the checkpoint goes there)",)


def plan_restarts(life: "Lifecycle", volumes: Mapping[str, str], job: str, kind: str) -> RestartPlan:
    """The restart side of a ``kind`` job named ``job`` with ``volumes`` (claim -> mount path)."""
    elastic = life.elastic is not None
    restarting = life.max_restarts > 0 or (life.policy != "Never" and kind != "TrainJob")
    first = next(iter(volumes.items()), None)
    if not restarting or first is None:
        return RestartPlan(life.max_restarts, restarting, False)
    base = posixpath.join(first[1], "distcomp", job)
    # torchrun counts an elastic job's restarts; pods that never restart count nothing
    counted = not elastic and life.policy != "Never"
    return RestartPlan(life.max_restarts, True, counted, posixpath.join(base, "checkpoint"), first[0],
                       posixpath.join(base, "starts") if counted else None)


def apply(manifest: dict[str, Any], plan: RestartPlan) -> None:
    """Each pod's main command behind the counting line (in place), when the pods count."""
    from ._settings import replica_specs

    if not plan.counted or plan.starts is None:
        return
    line = escape([_COUNT.format(starts=shlex.quote(plan.starts), env=RESTART_ENV)])[0]  # $ is the shell's, not the kubelet's
    for replica in replica_specs(manifest).values():
        main = replica["template"]["spec"]["containers"][0]
        main["command"] = ["/bin/sh", "-c", line, ARG0, *main["command"], *main.pop("args", [])]
