"""How a Kubeflow job lives and ends: retries, deadline, clean-up, restart policy, elastic
PyTorchJobs, gang scheduling and Kueue, each where the kind's CRD puts it.

``runPolicy`` (training-operator v1.9 and mpi-operator v2beta1 alike): ``backoffLimit``,
``ttlSecondsAfterFinished``, ``activeDeadlineSeconds``, ``schedulingPolicy.minAvailable``; each
replica's ``restartPolicy``; a PyTorchJob's ``elasticPolicy``. A TrainJob has only
``activeDeadlineSeconds`` (the rest is its runtime's); Kueue reads the queue label on any kind.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping

from ._errors import CompileError

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
RESTART_POLICIES = ("Never", "OnFailure", "ExitCode")  # Never: a failed rank fails the job, as locally
_RANGE = re.compile(r"^\s*(\d+)\s*:\s*(\d+)\s*$")
_LABEL = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


@dataclass(frozen=True)
class Lifecycle:
    backoff_limit: int | None = None  # retries of failed pods (with OnFailure/ExitCode) before the job fails
    ttl_seconds: int | None = None  # the finished job (and its pods) are deleted after this
    active_deadline: int | None = None  # the job is failed after this many seconds
    restart_policy: str = "Never"
    elastic: tuple[int, int] | None = None  # min:max nodes of an elastic PyTorchJob
    gang: bool = False  # all pods scheduled together or none (schedulingPolicy.minAvailable)
    queue: str | None = None  # Kueue's LocalQueue
    deadline_from_timeout: bool = False  # active_deadline is --timeout's, not asked for itself

    def __post_init__(self) -> None:
        if self.restart_policy not in RESTART_POLICIES:
            raise CompileError(f"--restart-policy {self.restart_policy!r}: expected one of "
                               f"{', '.join(RESTART_POLICIES)}")
        if self.queue is not None and (len(self.queue) > 63 or not _LABEL.match(self.queue)):
            raise CompileError(f"--queue {self.queue!r}: a Kueue LocalQueue name is a label value (at most 63 "
                               "letters, digits, '-', '_', '.')")


def node_range(text: str) -> tuple[int, int]:
    """TorchX's ``MIN:MAX`` node range."""
    found = _RANGE.match(text)
    if not found or not 1 <= int(found.group(1)) <= int(found.group(2)):
        raise CompileError(f"--elastic {text!r}: give a node range MIN:MAX with 1 <= MIN <= MAX, e.g. 2:4")
    return int(found.group(1)), int(found.group(2))


def lifecycle_of(options: Mapping[str, Any]) -> Lifecycle:
    """The options' Lifecycle; the deadline defaults to ``--timeout`` (submit) rounded up."""
    deadline = options.get("active_deadline")
    from_timeout = deadline is None and bool(options.get("timeout"))
    if from_timeout:
        deadline = -int(-float(options["timeout"]) // 1)
    elastic = options.get("elastic")
    return Lifecycle(options.get("backoff_limit"), options.get("ttl_seconds"), deadline,
                     options.get("restart_policy") or "Never", node_range(elastic) if elastic else None,
                     bool(options.get("gang")), options.get("queue"), from_timeout)


def apply(manifest: dict[str, Any], life: Lifecycle, replicas: dict[str, dict[str, Any]]) -> None:
    """``life`` written into ``manifest`` (in place); ``replicas``: its replica specs."""
    kind, spec = manifest.get("kind", ""), manifest["spec"]
    if life.queue:
        manifest["metadata"].setdefault("labels", {})[QUEUE_LABEL] = life.queue
    if kind == "TrainJob":
        _trainjob(spec, life)
        return
    if life.elastic:
        if kind != "PyTorchJob":
            raise CompileError(f"--elastic: a {kind} has no elastic node range (a PyTorchJob has: torch.distributed "
                               "and deepspeed launchers)")
        _elastic(spec, life, replicas)
    policy = {key: value for key, value in (("backoffLimit", life.backoff_limit),
                                            ("ttlSecondsAfterFinished", life.ttl_seconds),
                                            ("activeDeadlineSeconds", life.active_deadline)) if value is not None}
    if not replicas:  # a plugin's kind of another layout: nothing of ours to place it in
        if life.deadline_from_timeout:  # the target's own wait still ends the job at --timeout
            policy.pop("activeDeadlineSeconds", None)
        if policy or life.gang or life.restart_policy != "Never":
            raise CompileError(f"a {kind} has no replica specs or run policy that distcomp knows: --backoff-limit, "
                               "--ttl-seconds-after-finished, --active-deadline-seconds, --gang and "
                               "--restart-policy cannot be placed in it")
        return
    run = spec.setdefault("runPolicy", {})
    run.update(policy)
    if life.gang:
        # an elastic job may start with its fewest nodes; any other needs every pod
        least = life.elastic[0] if life.elastic else sum(r["replicas"] for r in replicas.values())
        run["schedulingPolicy"] = {"minAvailable": least}
    for replica in replicas.values():
        replica["restartPolicy"] = life.restart_policy


def _trainjob(spec: dict[str, Any], life: Lifecycle) -> None:
    unsupported = [flag for flag, given in (("--backoff-limit", life.backoff_limit is not None),
                                            ("--ttl-seconds-after-finished", life.ttl_seconds is not None),
                                            ("--restart-policy", life.restart_policy != "Never"),
                                            ("--elastic", life.elastic is not None), ("--gang", life.gang)) if given]
    if unsupported:
        raise CompileError(f"{', '.join(unsupported)}: a TrainJob leaves this to its runtime (the "
                           "ClusterTrainingRuntime's JobSet and PodGroup policies); compile without --trainer-v2")
    if life.active_deadline is not None:
        spec["activeDeadlineSeconds"] = life.active_deadline


def _elastic(spec: dict[str, Any], life: Lifecycle, replicas: dict[str, dict[str, Any]]) -> None:
    """An elastic PyTorchJob: Workers only (the operator's c10d rendezvous is on worker 0), as
    many as the range's most, ``torchrun`` taking the rendezvous from the operator's PET_*
    variables (its flags' defaults) instead of a fixed node rank."""
    from ._pytorchjob import TORCHRUN

    assert life.elastic is not None
    nodes = life.elastic
    worker = replicas.pop("Master")
    replicas.pop("Worker", None)
    command = worker["template"]["spec"]["containers"][0]["command"]
    if command[:len(TORCHRUN)] != list(TORCHRUN):
        raise CompileError("--elastic: the command starts its own torchrun; an elastic job needs distcomp's (its "
                           "rendezvous comes from the operator): drop the launcher from the command")
    command[:len(TORCHRUN)] = ["torchrun", "--no-python"]
    worker["replicas"] = nodes[1]
    replicas["Worker"] = worker
    spec["elasticPolicy"] = {"minReplicas": nodes[0], "maxReplicas": nodes[1], "rdzvBackend": "c10d",
                             # torchrun's own restarts of the node's ranks; the pods' are backoffLimit's
                             "maxRestarts": life.backoff_limit or 0}
