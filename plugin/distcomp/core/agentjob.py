"""The writer side of the node agent's record (``distcomp.agent.record`` holds its schema).

A target that runs a Topology through the node agent (``python -m distcomp.agent JOB.json``,
once per node) makes the record with ``node_record`` from the job's Plan, writes it into the job
folder, and gives every agent, in its environment, what only the platform knows: which node it
is (``Platform.node_env``), and the value of each placeholder named in ``bind_names`` (node
addresses and names, the job's ports). The record holds no secret: each one is an index into
the job's secrets file (``targets._secrets``), which the agent reads itself.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from ..agent.record import KEY, VERSION, check
from ..records import placeholders
from ..base.redact import NONE, Masker

if TYPE_CHECKING:
    from ..records import Topology

__all__ = ["Platform", "RECORD", "bind_names", "node_record", "record_env", "to_json"]

RECORD = "node.json"  # the record's name in a job folder


@dataclass(frozen=True)
class Platform:
    """What a platform tells its agents: the variables that say which node an agent is on (the
    first one set wins: ``SLURM_NODEID``; ``PET_NODE_RANK``, ``RANK`` in a Kubeflow pod) and its
    name in reports (``SLURMD_NODENAME``; else the host name), the values known when the record
    is written (``job_id``...), where the replicas run (``cwd``, relative to the job folder),
    the secrets file, and whether each line is echoed to the agent's stdout (a pod's log). A
replica that is one process (``ranks`` 1) does not inherit ``task_env``: the platform's rank
variables describe the agent's task (one per node), not the replica."""

    node_env: tuple[str, ...]
    node_name_env: tuple[str, ...] = ()
    task_env: tuple[str, ...] = ()  # the platform's variables of the agent's task (SLURM_PROCID), not a rank's
    values: Mapping[str, str] = field(default_factory=dict)
    bind_env: Mapping[str, str] = field(default_factory=dict)  # extra placeholder -> variable (job_id)
    cwd: str = "code"
    secrets: str | None = None
    console: bool = False
    grace: float = 5.0


def bind_names(topology: "Topology") -> dict[str, str]:
    """Placeholder -> the environment variable an agent reads its value from: ``host:N`` ->
    ``DISTCOMP_HOST_N`` (node N's address), ``node:N`` -> ``DISTCOMP_NODE_N`` (its name, as a
    hostfile lists it), ``port:NAME`` -> ``DISTCOMP_PORT_I`` (I: its place in ``Topology.ports``)."""
    names = {}
    for n in range(topology.nodes):
        names[f"host:{n}"] = f"DISTCOMP_HOST_{n}"
        names[f"node:{n}"] = f"DISTCOMP_NODE_{n}"
    for i, port in enumerate(topology.ports):
        names[f"port:{port}"] = f"DISTCOMP_PORT_{i}"
    return names


def _text(value: str, masker: Masker, index: Mapping[str, int]) -> str | list[str | int]:
    """A record TEXT: ``value``, or its pieces with each secret as its index in the secrets file."""
    pieces = masker.pieces(value) if masker else []
    if not any(secret for _p, secret in pieces):
        return value
    return [index[p] if secret else p for p, secret in pieces]


def record_env(env: Mapping[str, str], masker: Masker = NONE) -> dict[str, Any]:
    """``env`` as a record holds it: each secret (``masker``) an index into the secrets file."""
    index = {n: i for i, n in enumerate(masker.needles)}
    return {k: _text(v, masker, index) for k, v in env.items()}


def node_record(topology: "Topology", command: Sequence[str], env: Mapping[str, str], platform: Platform, *,
                job: str, masker: Masker = NONE, zero_or_greater: bool = False) -> dict[str, Any]:
    """The record of a job: ``topology`` (the Plan's), the rendered ``command`` (argv, or the
    spec's ``("/bin/sh", "-c", LINE)``), ``env`` for every replica (the spec's variables, the
    MLflow run's); secrets (``masker``) become indexes into ``platform.secrets``."""
    index = {n: i for i, n in enumerate(masker.needles)}
    used = {f"{kind}:{arg}" for r in topology.replicas for t in (*r.argv, *r.env.values())
            for kind, arg in placeholders(t) if kind in ("host", "node", "port")}
    used |= {f"{kind}:{arg}" for t in topology.files.values() for kind, arg in placeholders(t)
             if kind in ("host", "node", "port")}
    names = bind_names(topology)
    missing = sorted(used - set(names))
    if missing:  # a placeholder for a node the job does not have
        raise ValueError(f"the topology names {', '.join(missing)}, which a {topology.nodes}-node job has not")
    record: dict[str, Any] = {
        KEY: VERSION, "job": job, "launcher": topology.launcher, "nodes": topology.nodes,
        "world_size": topology.world_size, "cwd": platform.cwd,
        "command": [_text(w, masker, index) for w in command],
        "env": record_env(env, masker),
        # several processes share a node: one OpenMP thread each unless the user says otherwise
        "defaults": {"OMP_NUM_THREADS": "1"} if topology.processes_per_node > 1 else {},
        "replicas": [{"name": r.name, "role": r.role, "index": r.index, "node": r.node, "rank": r.rank,
                      "ranks": r.ranks, "service": r.service, "argv": list(r.argv), "env": dict(r.env),
                      **({"rank_prefix": r.rank_prefix} if r.rank_prefix else {}),
                      **({"rank_hooks": list(r.rank_hooks)} if r.rank_hooks else {})}
                     for r in topology.replicas],
        "files": dict(topology.files), "ports": list(topology.ports),
        "values": dict(platform.values), "bind_env": {**names, **platform.bind_env},
        "node_env": list(platform.node_env), "node_name_env": list(platform.node_name_env),
        "task_env": list(platform.task_env),
        "secrets": platform.secrets if masker else None, "console": platform.console, "grace": platform.grace,
        "zero_or_greater": zero_or_greater,
    }
    return check(record, "the node record")


def to_json(record: Mapping[str, Any]) -> str:
    """The record as JSON to read: one field a line, one replica a line."""
    def value(key: str, v: Any) -> str:
        if key == "replicas":
            return "[\n  " + ",\n  ".join(json.dumps(r) for r in v) + "\n ]"
        return json.dumps(v)
    return "{\n" + ",\n".join(f" {json.dumps(k)}: {value(k, v)}" for k, v in record.items()) + "\n}\n"

