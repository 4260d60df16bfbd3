"""Which pod's log holds a rank's output, from the job object's own layout and the labels the
operators put on their pods (training-operator v1.9, mpi-operator v0.8, Trainer v2's JobSet)."""

from __future__ import annotations

from typing import Any, Mapping

from ...errors import UsageError

_JOB = "training.kubeflow.org/job-name"
_TYPE, _INDEX = "training.kubeflow.org/replica-type", "training.kubeflow.org/replica-index"


def _count(specs: Mapping[str, Any], replica_type: str) -> int:
    spec = specs.get(replica_type)
    return int(spec.get("replicas", 1)) if isinstance(spec, Mapping) else 0


def _per_node(value: Any) -> int:
    return int(value) if str(value).isdigit() and int(value) > 0 else 1  # "auto": the operator's 1 without a GPU


def _beyond(rank: int, world: int, kind: str, name: str) -> UsageError:
    return UsageError(f"rank {rank}: {kind} {name} has {world} rank(s) (0..{world - 1})")


def rank_pod(obj: Mapping[str, Any], rank: int) -> tuple[str, str]:
    """The label selector of the pod whose log holds ``rank``'s output, and what that pod is."""
    kind, name = obj.get("kind", ""), obj["metadata"]["name"]
    spec = obj.get("spec") or {}
    if rank < 0:
        raise UsageError(f"rank {rank}: a rank is 0 or more")
    if kind == "PyTorchJob":  # one pod per node: Master is node 0, Worker i node i+1 (elastic: Workers only)
        specs = spec.get("pytorchReplicaSpecs") or {}
        layout = [("master", i) for i in range(_count(specs, "Master"))] + \
                 [("worker", i) for i in range(_count(specs, "Worker"))]
        per = _per_node(spec.get("nprocPerNode"))
        if rank >= per * len(layout):
            raise _beyond(rank, per * len(layout), kind, name)
        rtype, index = layout[rank // per]
        what = f"{rtype} {index}" + (" (an elastic job's node ranks follow its rendezvous)"
                                     if "elasticPolicy" in spec else "")
        return f"{_JOB}={name},{_TYPE}={rtype},{_INDEX}={index}", what
    if kind == "TFJob":  # one pod per task; the ranks are the chief's, then the workers' (ps and evaluator: none)
        specs = spec.get("tfReplicaSpecs") or {}
        layout = [("chief", i) for i in range(_count(specs, "Chief"))] + \
                 [("worker", i) for i in range(_count(specs, "Worker"))]
        if rank >= len(layout):
            raise _beyond(rank, len(layout), kind, name)
        rtype, index = layout[rank]
        return f"{_JOB}={name},{_TYPE}={rtype},{_INDEX}={index}", f"{rtype} {index}"
    if kind == "MPIJob":  # mpirun in the launcher gathers every rank's output; workers only run sshd
        world = _count(spec.get("mpiReplicaSpecs") or {}, "Worker") * int(spec.get("slotsPerWorker") or 1)
        if rank >= world:
            raise _beyond(rank, world, kind, name)
        return f"{_JOB}={name},training.kubeflow.org/job-role=launcher", "the launcher (mpirun gathers every rank's output)"
    if kind == "TrainJob":  # the runtime's "node" job, one indexed pod per node
        trainer = spec.get("trainer") or {}
        nodes, per = int(trainer.get("numNodes") or 1), _per_node(trainer.get("numProcPerNode"))
        if rank >= nodes * per:
            raise _beyond(rank, nodes * per, kind, name)
        return (f"jobset.sigs.k8s.io/jobset-name={name},jobset.sigs.k8s.io/replicatedjob-name=node,"
                f"batch.kubernetes.io/job-completion-index={rank // per}", f"node {rank // per}")
    raise UsageError(f"a {kind}'s pods are laid out by its plugin: distcomp reads only the leading pod's log "
                     "(leave out --rank)")
