"""How a Kubeflow job lives and ends: retries, deadline, clean-up, restart policy, elastic
PyTorchJobs, gang scheduling and Kueue, each where the kind's CRD puts it.

``runPolicy`` (training-operator v1.9 and mpi-operator v2beta1 alike): ``backoffLimit``,
``ttlSecondsAfterFinished``, ``activeDeadlineSeconds``, ``schedulingPolicy.minAvailable``; each
replica's ``restartPolicy``; a PyTorchJob's ``elasticPolicy``. A TrainJob has only
``activeDeadlineSeconds`` (the rest is its runtime's); Kueue reads the queue label on any kind.

Restarts have one rule: ``--max-restarts K`` (the Plan's, issue 36's contract: the whole job
started again up to K times) gives each replica ``restartPolicy: OnFailure`` and a
``backoffLimit`` that K restarts of every pod fit in: training-operator v1.9 (pkg/core/job.go,
PastBackoffLimit) sums the restarts of all the job's pods and fails it once the sum reaches the
limit, so K x pods + 1. An elastic PyTorchJob restarts inside its pods instead: torchrun's
``elasticPolicy.maxRestarts`` is K (its agent restarts every rank on every node), the pods stay
``Never``. ``--restart-policy`` and ``--backoff-limit`` are the operator's own knobs: given, they
replace what K derives, and one that contradicts K (``Never``, a limit of 0) is an error.
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
    restart_policy: str | None = None  # --restart-policy as given; None: what max_restarts derives (``policy``)
    elastic: tuple[int, int] | None = None  # min:max nodes of an elastic PyTorchJob
    gang: bool = False  # all pods scheduled together or none (schedulingPolicy.minAvailable)
    queue: str | None = None  # Kueue's LocalQueue
    deadline_from_timeout: bool = False  # active_deadline is --timeout's, not asked for itself
    max_restarts: int = 0  # the Plan's: how many times the failed job starts again

    def __post_init__(self) -> None:
        if self.restart_policy is not None and self.restart_policy not in RESTART_POLICIES:
            raise CompileError(f"--restart-policy {self.restart_policy!r}: expected one of "
                               f"{', '.join(RESTART_POLICIES)}")
        k = self.max_restarts
        if k and not self.elastic and self.restart_policy == "Never":
            raise CompileError(f"--max-restarts {k} starts the failed job again, --restart-policy Never never "
                               "restarts a pod: drop --restart-policy (OnFailure is what --max-restarts gives) or "
                               "give --max-restarts 0")
        if k and not self.elastic and self.backoff_limit == 0:
            raise CompileError(f"--max-restarts {k} starts the failed job again, --backoff-limit 0 fails it at its "
                               "first pod restart: drop --backoff-limit (distcomp derives it from --max-restarts)")
        if self.queue is not None and (len(self.queue) > 63 or not _LABEL.match(self.queue)):
            raise CompileError(f"--queue {self.queue!r}: a Kueue LocalQueue name is a label value (at most 63 "
                               "letters, digits, '-', '_', '.')")

    @property
    def policy(self) -> str:
        """Each replica's restartPolicy: the one given, else OnFailure when the job restarts (an
        elastic job restarts inside its pods: Never), else Never (a failed rank fails the job)."""
        if self.restart_policy is not None:
            return self.restart_policy
        return "OnFailure" if self.max_restarts and not self.elastic else "Never"

    def backoff(self, pods: int) -> int | None:
        """runPolicy.backoffLimit for a job of ``pods`` pods: the one given, else room for
        ``max_restarts`` restarts of every pod (the operator fails the job once the pods'
        restarts add up to the limit)."""
        if self.backoff_limit is not None or not self.max_restarts or self.policy == "Never":
            return self.backoff_limit
        return self.max_restarts * pods + 1


def node_range(text: str) -> tuple[int, int]:
    """TorchX's ``MIN:MAX`` node range."""
    found = _RANGE.match(text)
    if not found or not 1 <= int(found.group(1)) <= int(found.group(2)):
        raise CompileError(f"--elastic {text!r}: give a node range MIN:MAX with 1 <= MIN <= MAX, e.g. 2:4")
    return int(found.group(1)), int(found.group(2))


def lifecycle_of(options: Mapping[str, Any], max_restarts: int = 0) -> Lifecycle:
    """The options' Lifecycle; the deadline defaults to ``--timeout`` (submit) rounded up;
    ``max_restarts``: the Plan's."""
    deadline = options.get("active_deadline")
    from_timeout = deadline is None and bool(options.get("timeout"))
    if from_timeout:
        deadline = -int(-float(options["timeout"]) // 1)
    elastic = options.get("elastic")
    return Lifecycle(options.get("backoff_limit"), options.get("ttl_seconds"), deadline,
                     options.get("restart_policy") or None, node_range(elastic) if elastic else None,
                     bool(options.get("gang")), options.get("queue"), from_timeout, max_restarts)


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
    pods = sum(int(r.get("replicas", 1)) for r in replicas.values())
    policy = {key: value for key, value in (("backoffLimit", life.backoff(pods)),
                                            ("ttlSecondsAfterFinished", life.ttl_seconds),
                                            ("activeDeadlineSeconds", life.active_deadline)) if value is not None}
    if not replicas:  # a plugin's kind of another layout: nothing of ours to place it in
        if life.deadline_from_timeout:  # the target's own wait still ends the job at --timeout
            policy.pop("activeDeadlineSeconds", None)
        if policy or life.gang or life.policy != "Never" or life.max_restarts:
            raise CompileError(f"a {kind} has no replica specs or run policy that distcomp knows: --backoff-limit, "
                               "--ttl-seconds-after-finished, --active-deadline-seconds, --gang, --restart-policy "
                               "and --max-restarts cannot be placed in it")
        return
    run = spec.setdefault("runPolicy", {})
    run.update(policy)
    if life.gang:
        # an elastic job may start with its fewest nodes; any other needs every pod
        least = life.elastic[0] if life.elastic else sum(r["replicas"] for r in replicas.values())
        run["schedulingPolicy"] = {"minAvailable": least}
    for replica in replicas.values():
        replica["restartPolicy"] = life.policy


def _trainjob(spec: dict[str, Any], life: Lifecycle) -> None:
    unsupported = [flag for flag, given in (("--backoff-limit", life.backoff_limit is not None),
                                            ("--ttl-seconds-after-finished", life.ttl_seconds is not None),
                                            ("--restart-policy", life.restart_policy not in (None, "Never")),
                                            ("--max-restarts", life.max_restarts > 0),
                                            ("--elastic", life.elastic is not None), ("--gang", life.gang)) if given]
    if unsupported:
        raise CompileError(f"{', '.join(unsupported)}: a TrainJob leaves this to its runtime (the "
                           "ClusterTrainingRuntime's JobSet failurePolicy and PodGroup policies); compile without "
                           "--trainer-v2" + (", or give --max-restarts 0" if life.max_restarts else ""))
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
                             # torchrun's restarts of every rank on every node: the contract's, else
                             # (no --max-restarts) the pods' backoffLimit as before
                             "maxRestarts": life.max_restarts or life.backoff_limit or 0}
