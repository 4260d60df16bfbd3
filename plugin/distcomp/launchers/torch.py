"""torch.distributed: torchrun's worker contract, one replica per rank.

Locally the ranks are spawned directly with the env torchrun would give them (no elastic
agent, which costs about 2 s of a small job on this kind of machine). Rank 0 hosts the
TCPStore at MASTER_ADDR:MASTER_PORT, as with ``init_method="env://"`` under torchrun.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..base.launchernames import BUILTIN
from ..core.hookspec import hookimpl
from ..records import (JOB_DIR, JOB_ID, MAX_RESTARTS, RESTART, LauncherType, Replica, Topology,
                       host, port)

if TYPE_CHECKING:
    from ..spec import ComponentSpec

NAME = "torch.distributed"


def torch_env(rank: int, local_rank: int, node: int, nodes: int, per_node: int) -> dict[str, str]:
    """What torchrun's local agent sets for one worker (plus NODE_RANK, which launchers add)."""
    world = nodes * per_node
    return {
        "MASTER_ADDR": host(0), "MASTER_PORT": port("master"),
        "WORLD_SIZE": str(world), "RANK": str(rank),
        "LOCAL_RANK": str(local_rank), "LOCAL_WORLD_SIZE": str(per_node),
        "GROUP_RANK": str(node), "NODE_RANK": str(node), "GROUP_WORLD_SIZE": str(nodes),
        "ROLE_NAME": "default", "ROLE_RANK": str(rank), "ROLE_WORLD_SIZE": str(world),
        "TORCHELASTIC_RESTART_COUNT": RESTART, "TORCHELASTIC_MAX_RESTARTS": MAX_RESTARTS,
        "TORCHELASTIC_RUN_ID": JOB_ID, "TORCHELASTIC_USE_AGENT_STORE": "False",
        "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1",
        # as torchrun: where @record writes a failing rank's exception (the root cause, when there)
        "TORCHELASTIC_ERROR_FILE": f"{JOB_DIR}/rank{rank}.attempt{RESTART}.error.json",
        "TORCHELASTIC_SIGNALS_TO_HANDLE": "SIGTERM,SIGINT,SIGHUP,SIGQUIT",
    }


def rank_topology(spec: "ComponentSpec", launcher: str = NAME) -> Topology:
    """nodes x processes_per_node ranks, numbered node by node."""
    d = spec.distribution
    nodes, per_node = d.nodes, d.processes_per_node or 1
    replicas = tuple(
        Replica(role="worker", index=node * per_node + local, node=node, rank=node * per_node + local,
                env=torch_env(node * per_node + local, local, node, nodes, per_node))
        for node in range(nodes) for local in range(per_node))
    # torchrun's default: one OpenMP thread per rank when several share a machine
    local_env = {"OMP_NUM_THREADS": "1"} if per_node > 1 or nodes > 1 else {}
    return Topology(launcher=launcher, nodes=nodes, processes_per_node=per_node, world_size=nodes * per_node,
                    replicas=replicas, ports=("master",), local_env=local_env)


@hookimpl
def distcomp_launchers():  # type: ignore[no-untyped-def]
    yield LauncherType(
        name=NAME, factory=rank_topology, aliases=BUILTIN[NAME],
        description="PyTorch torch.distributed: torchrun's env (RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, ...)")


@hookimpl
def distcomp_native_mappings():  # type: ignore[no-untyped-def]
    from ..core.kinds import AZUREML, KUBEFLOW, NativeMapping

    yield NativeMapping(NAME, KUBEFLOW, "PyTorchJob")  # one pod per node, torchrun in each
    yield NativeMapping(NAME, KUBEFLOW, "TrainJob", {"runtime": "torch-distributed"})
    yield NativeMapping(NAME, AZUREML, "pytorch")  # Azure starts each node's ranks with torchrun's env
