"""How each node of a job is named in its system metrics (``system/<node>/<metric>``): a real
node by its host name (what the MLflow UI shows beside the other nodes' series; the node agent
names its own node the same way, ``agent.sysmetrics.node_id``), a simulated node of a local job
as ``node-N``."""

from __future__ import annotations

import socket

from ..agent.sysmetrics import node_id

__all__ = ["host_node_id", "local_node_ids"]


def host_node_id(name: str | None = None) -> str:
    """``name`` (default: this host's name) as one segment of a metric name."""
    return node_id(name if name is not None else socket.gethostname())


def local_node_ids(nodes: int) -> list[str]:
    """A local job's node ids: this host's name for one node; ``node-0``, ``node-1``... for simulated ones."""
    return [host_node_id()] if nodes == 1 else [f"node-{n}" for n in range(nodes)]
