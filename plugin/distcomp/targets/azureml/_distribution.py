"""A launcher's Azure ML ``distribution`` from its native mapping (platform ``azureml``).

The mapping is data: its kind is Azure's distribution type, its options fields of that
distribution. The counts Azure needs come from the job's Topology (the processes on each node,
the TensorFlow roles), by distribution type (Azure's notion, never a launcher's name), and the
mapping's options go over them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._errors import AzureMLTargetError

if TYPE_CHECKING:
    from ...core.kinds import NativeMapping
    from ...core.plan import Plan


def distribution(mapping: "NativeMapping", plan: "Plan") -> dict[str, Any]:
    """The component's ``distribution``; the target sets ``resources.instance_count`` (the
    Topology's nodes) itself."""
    t = plan.topology
    if mapping.kind == "pytorch":
        # Azure starts each instance's processes with torchrun's env: the Topology's per node (one
        # where the command brings its own torchrun, Azure's documented way: it starts the rest)
        counts: dict[str, Any] = {"process_count_per_instance": per_instance(plan)}
    elif mapping.kind == "mpi":  # Azure's mpirun over process_count_per_instance slots per node
        counts = {"process_count_per_instance": t.processes_per_node}
    elif mapping.kind == "tensorflow":  # Azure writes TF_CONFIG for the workers and parameter servers
        roles = t.roles()
        counts = {"worker_count": roles.get("worker", 0), "parameter_server_count": roles.get("ps", 0)}
    else:  # ray, or a type azure-ai-ml knows and distcomp does not: the mapping's options say it all
        counts = {}
    return {"type": mapping.kind, **counts, **mapping.options}


def per_instance(plan: "Plan") -> int:
    """How many of the Topology's processes run on each node (the same on every one, or an
    AzureMLTargetError: Azure starts process_count_per_instance on each instance)."""
    t = plan.topology
    if plan.own is not None and plan.own.once:  # one mpirun for every rank: the target refuses it, saying why
        return t.processes_per_node
    counts = {n: 0 for n in range(t.nodes)}
    for r in t.replicas:
        if not r.service:
            counts[r.node] = counts.get(r.node, 0) + 1
    found = set(counts.values())
    if len(found) != 1 or 0 in found:
        raise AzureMLTargetError(f"launcher {t.launcher!r} lays out {dict(sorted(counts.items()))} process(es) by node; "
                                 "Azure ML starts the same number on each instance (process_count_per_instance)")
    return found.pop()
