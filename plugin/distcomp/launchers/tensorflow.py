"""tensorflow.distributed: one process per task, each with its TF_CONFIG.

Workers are nodes x processes per node (or the spec's worker_count), and parameter servers
are the spec's parameter_server_count: the layout Azure ML documents for its tensorflow
distribution (``worker_count`` workers, ``parameter_server_count`` ps, and no chief: worker 0 is
the chief), so a job has the same tasks on every target. Only a declared ``chief`` or
``evaluator`` role (the draft dialect) adds those tasks. Parameter servers and the evaluator
serve the others: the job ends when the chief and workers are done, as a TFJob's default policy.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from ..base.launchernames import BUILTIN
from ..core.hookspec import hookimpl
from ..records import LauncherType, Replica, Topology, host, port

if TYPE_CHECKING:
    from ..spec import ComponentSpec

NAME = "tensorflow.distributed"


def _declared(spec: "ComponentSpec", role: str) -> int:
    r = spec.distribution.role(role)
    return min(1, r.count if r.count is not None else 1) if r is not None else 0


def tf_config(cluster: dict[str, list[str]], role: str, index: int) -> str:
    """One task's TF_CONFIG, as Azure ML and Kubeflow's TFJob operator write it, on every target:
    ``"environment": "cloud"`` included, which older Estimator code (RunConfig) reads."""
    return json.dumps({"cluster": cluster, "task": {"type": role, "index": index}, "environment": "cloud"})


def tf_topology(spec: "ComponentSpec") -> Topology:
    d = spec.distribution
    per_node = d.processes_per_node or 1
    workers = d.worker_count or d.nodes * per_node
    ps = d.parameter_server_count
    chief = _declared(spec, "chief")  # none for parameter servers: Azure ML's layout, worker 0 leads
    evaluator = _declared(spec, "evaluator")
    # (role, index, node); the chief, parameter servers and evaluator sit on the first node
    tasks = ([("chief", 0, 0)] * chief + [("worker", i, min(i // per_node, d.nodes - 1)) for i in range(workers)]
             + [("ps", i, 0) for i in range(ps)] + [("evaluator", 0, 0)] * evaluator)

    def address(role: str, index: int, node: int) -> str:
        return f"{host(node)}:{port(f'{role}-{index}')}"

    cluster: dict[str, list[str]] = {}
    for role, index, node in tasks:
        if role != "evaluator":  # TensorFlow keeps the evaluator out of the cluster spec
            cluster.setdefault(role, []).append(address(role, index, node))
    replicas = tuple(
        Replica(role=role, index=index, node=node,
                rank=(index + chief if role == "worker" else 0) if role in ("chief", "worker") else None,
                service=role in ("ps", "evaluator"),
                env={"TF_CONFIG": tf_config(cluster, role, index)})
        for role, index, node in tasks)
    ports = tuple(f"{role}-{index}" for role, index, _ in tasks if role != "evaluator")
    return Topology(launcher=NAME, nodes=d.nodes, processes_per_node=per_node, world_size=workers + chief,
                    replicas=replicas, ports=ports, local_env=_cpu_only())


def _cpu_only() -> dict[str, str]:
    """Hide GPUs from TensorFlow on a machine that has none (it probes CUDA at start)."""
    from pathlib import Path
    return {} if Path("/dev/nvidiactl").exists() else {"CUDA_VISIBLE_DEVICES": "-1"}


@hookimpl
def distcomp_launchers():  # type: ignore[no-untyped-def]
    yield LauncherType(name=NAME, factory=tf_topology, aliases=BUILTIN[NAME],
                       description="TensorFlow: one process per task with TF_CONFIG (worker, chief, ps, evaluator)")


@hookimpl
def distcomp_native_mappings():  # type: ignore[no-untyped-def]
    from ..core.kinds import AZUREML, KUBEFLOW, NativeMapping

    yield NativeMapping(NAME, KUBEFLOW, "TFJob")  # one pod per TensorFlow task, TF_CONFIG from the operator
    yield NativeMapping(NAME, AZUREML, "tensorflow")  # Azure writes TF_CONFIG for the workers and ps
