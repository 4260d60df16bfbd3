"""A launcher's Azure ML ``distribution`` from its native mapping (platform ``azureml``).

The mapping is data: its kind is Azure's distribution type, its options fields of that
distribution. The counts Azure needs come from the job's plan, by distribution type (Azure's
notion, never a launcher's name), and the mapping's options go over them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ...core.kinds import NativeMapping
    from ...core.plan import Plan


def distribution(mapping: "NativeMapping", plan: "Plan") -> dict[str, Any]:
    """The component's ``distribution``; the target sets ``resources.instance_count`` itself."""
    d = plan.spec.distribution
    per_node = plan.slots_per_node  # the spec's, or its GPUs (seed 003's MPI workers)
    if mapping.kind == "pytorch":
        # a command that brings its own torchrun (or torch.distributed.launch, ...) is started once
        # per node, as Azure's documentation has it: one process per instance, its launcher does the rest
        own = plan.own
        counts: dict[str, Any] = {"process_count_per_instance": 1 if own is not None and not own.once else per_node}
    elif mapping.kind == "mpi":  # Azure's mpirun over process_count_per_instance slots per node
        counts = {"process_count_per_instance": per_node}
    elif mapping.kind == "tensorflow":  # Azure writes TF_CONFIG for the workers and parameter servers
        counts = {"worker_count": d.worker_count or d.nodes * per_node, "parameter_server_count": d.parameter_server_count}
    else:  # ray, or a type azure-ai-ml knows and distcomp does not: the mapping's options say it all
        counts = {}
    return {"type": mapping.kind, **counts, **mapping.options}
