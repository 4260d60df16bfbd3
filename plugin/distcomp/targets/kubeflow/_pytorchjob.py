"""PyTorchJob (kubeflow.org/v1, training-operator 1.9), for any launcher whose ranks read torchrun's env.

One pod per node of the job's Topology: the Master is node 0, Workers the rest, each starting
the Topology's processes per node. The operator gives every pod MASTER_ADDR/MASTER_PORT,
PET_NNODES, PET_NPROC_PER_NODE and PET_NODE_RANK; ``torchrun`` in each pod starts that node's
ranks with the full torchrun contract. ``--no-python``: the command is the user's argv as is
(``python train.py ...``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...records import JobOptions
from ._errors import CompileError
from ._pod import RUN_POLICY, container, escape, metadata, replica

if TYPE_CHECKING:
    from ...spec import ComponentSpec

PORT = 23456  # the operator's default; its service exposes the master's "pytorchjob-port"
TORCHRUN = ("torchrun", "--nnodes", "$(PET_NNODES)", "--nproc-per-node", "$(PET_NPROC_PER_NODE)",
            "--node-rank", "$(PET_NODE_RANK)", "--master-addr", "$(MASTER_ADDR)", "--master-port",
            "$(MASTER_PORT)", "--no-python")


def pytorchjob(spec: "ComponentSpec", options: JobOptions) -> dict[str, Any]:
    from ...spec._template import SHELL, as_shell_line

    from ...core.plan import job_env

    env = job_env(spec, options.env)  # the spec's, --env, distcomp's rank defaults
    nodes, per_node = node_layout(options, "PyTorchJob")
    own = options.own
    if own is not None and not own.once:  # the user's torchrun (or launch, ...) once per pod, as on Azure ML:
        # it reads NODE_RANK, which the operator names PET_NODE_RANK; no torchrun of ours around it
        command = [*SHELL, 'export NODE_RANK="${NODE_RANK:-$PET_NODE_RANK}"; ' + as_shell_line(options.command)]
        argv = escape(command)
    else:
        argv = [*TORCHRUN, *escape(options.command)]
    # the operator reads the master port from the container named "pytorch", port "pytorchjob-port"
    c = container("pytorch", options, argv, env, [("pytorchjob-port", PORT)])
    replicas = {"Master": replica(1, c, options=options)}
    if nodes > 1:
        replicas["Worker"] = replica(nodes - 1, c, options=options)
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": metadata(options, spec.name),
            "spec": {"nprocPerNode": str(per_node), "runPolicy": dict(RUN_POLICY),
                     "pytorchReplicaSpecs": replicas}}


def node_layout(options: JobOptions, kind: str) -> tuple[int, int]:
    """The Topology's nodes and processes per node, for a kind that starts the same number of
    processes on every node (one pod per node, ``torchrun --nproc-per-node`` in each): a
    CompileError where its world is not nodes x processes per node."""
    t = options.topology
    if t.world_size != t.nodes * t.processes_per_node:
        raise CompileError(f"{kind} {options.name}: launcher {t.launcher!r} lays out {t.world_size} rank(s) on "
                           f"{t.nodes} node(s) x {t.processes_per_node}; a {kind} runs the same number of processes "
                           "on every node (its world is nodes x processes per node)")
    return t.nodes, t.processes_per_node
