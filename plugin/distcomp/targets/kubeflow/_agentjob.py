"""Any launcher on Kubeflow: one pod per node, each running distcomp's node agent.

A launcher with no Kubeflow mapping of its own (``distcomp_native_mappings``) still runs: its
Topology goes into a node record, and every pod of a PyTorchJob (kubeflow.org/v1; the training
operator's one-pod-per-node job with a DNS name per pod) runs the agent on it, carried in the
pod's command (``distcomp.core.agentboot``), so the image needs only Python. The operator tells each
pod which node it is (``RANK``: the Master 0, Worker i is i+1) and the first node's address
(``MASTER_ADDR``); node N's address is its pod's service, ``JOB-worker-(N-1)``. Pods have a
network each, so the Topology's ports are fixed numbers.

A plan of one bare process (``Topology.plain``: a step without a launcher, a pipeline's data
prep) is the plainest such job: one Master pod that runs the command itself, no agent, so the
image needs nothing but what the command does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...core.agentboot import boot_argv
from ...core.agentjob import Platform, node_record
from ...agent.sysmetrics import entry as sysmetrics_entry
from ...records import JobOptions, KubeflowJobType
from ._errors import CompileError
from ._pod import RUN_POLICY, container, escape, metadata, replica
from ._pytorchjob import PORT

if TYPE_CHECKING:
    from ...spec import ComponentSpec

__all__ = ["agentjob", "agentjob_type"]


def agentjob(spec: "ComponentSpec", options: JobOptions) -> dict[str, Any]:
    topology = options.topology
    env = {**spec.environment_variables, **options.env}
    if topology.plain:
        from ...core.plan import plain_env

        # the operator reads the master port from the container named "pytorch", port "pytorchjob-port"
        c = container("pytorch", options, escape(options.command), {**plain_env(topology), **env},
                      [("pytorchjob-port", PORT)])
        return _job(spec, options, {"Master": replica(1, c, options=options)})
    # node 0 is MASTER_ADDR (from the operator); node N >= 1 the service of pod JOB-worker-(N-1)
    values = {f"{kind}:{n}": f"{options.name}-worker-{n - 1}" for n in range(1, topology.nodes) for kind in ("host", "node")}
    values |= {f"port:{p}": str(PORT + i) for i, p in enumerate(topology.ports)}
    # the operator's per-pod rank variables describe the agent's pod, not a rank
    task = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "PET_NODE_RANK", "PET_NNODES", "PET_NPROC_PER_NODE")
    platform = Platform(node_env=("PET_NODE_RANK", "RANK"), node_name_env=("HOSTNAME",), values=values, task_env=task,
                        bind_env={"host:0": "MASTER_ADDR", "node:0": "MASTER_ADDR"}, cwd=".", console=True)
    try:
        record = node_record(topology, options.command, {}, platform, job=options.name,
                             zero_or_greater=spec.successful_return_code != "Zero")
        record.update(sysmetrics_entry(options.system_metrics_interval))  # the agent samples its pod's node
    except ValueError as exc:
        raise CompileError(f"{options.name}: {exc}") from None
    c = container("pytorch", options, escape(boot_argv(record)), env, [("pytorchjob-port", PORT)])
    replicas = {"Master": replica(1, c, options=options)}
    if topology.nodes > 1:
        replicas["Worker"] = replica(topology.nodes - 1, c, options=options)
    return _job(spec, options, replicas)


def _job(spec: "ComponentSpec", options: JobOptions, replicas: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": metadata(options, spec.name),
            "spec": {"runPolicy": dict(RUN_POLICY), "pytorchReplicaSpecs": replicas}}


def agentjob_type(launcher: str) -> KubeflowJobType:
    """The job of a launcher that has no Kubeflow mapping: distcomp's node agent in each pod."""
    return KubeflowJobType(launcher, "PyTorchJob", agentjob, "one pod per node, distcomp's node agent in each",
                           api_version="kubeflow.org/v1", plural="pytorchjobs",
                           leader="training.kubeflow.org/job-name={name},training.kubeflow.org/replica-type=master")
