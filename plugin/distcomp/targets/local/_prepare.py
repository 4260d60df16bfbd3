"""Bind a Topology to this machine: node N is 127.0.0.N+1, ports are free ones, and each
replica gets a copy of its argv and env with the placeholders filled in."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from ...agent import rankwatch
from ...records import COMMAND, Replica, Topology, bind
from ...registry import stored_code_env
from ...spec import ComponentSpec
from ._ports import free_ports

def node_address(node: int) -> str:
    """A loopback address per simulated node (127.0.0.1, 127.0.0.2, ...: Linux routes all of
    127/8 here), so each node is told apart by its address as in a cluster."""
    return f"127.0.{node // 250}.{node % 250 + 1}"


RANK_EXITS = "rank-exits"  # in the run folder: the rank watcher's reports (``distcomp.agent.rankwatch``)


@dataclass(frozen=True)
class Launch:
    """One process to start: the replica it plays, its argv, full env and folder."""

    replica: Replica
    argv: tuple[str, ...]
    env: Mapping[str, str]
    cwd: Path


def bindings(topology: Topology, job_dir: Path, job_id: str, attempt: int, max_restarts: int) -> dict[str, str]:
    """Placeholder values for one attempt on this machine (fresh ports every attempt)."""
    values = {"job_dir": str(job_dir), "job_id": job_id, "restart": str(attempt),
              "max_restarts": str(max_restarts)}
    for n in range(topology.nodes):
        values[f"host:{n}"] = node_address(n)
        # a single node is this machine; simulated nodes get names the launcher's local agent maps here
        values[f"node:{n}"] = "localhost" if topology.nodes == 1 else f"node{n}"
    values.update({f"port:{name}": str(p) for name, p in zip(topology.ports, free_ports(len(topology.ports)))})
    return values


def base_env(spec: ComponentSpec, topology: Topology, outer: Mapping[str, str]) -> dict[str, str]:
    """This process's env, then the topology's local defaults, then the spec's variables.

    The interpreter's folder goes first on PATH, so ``python``, ``mpirun`` and ``torchrun``
    in a command are those of the environment distcomp runs in (as ``tox``/``uv run`` do).
    """
    env = dict(outer)
    for name, value in topology.local_env.items():
        if name not in env and name not in spec.environment_variables:
            env[name] = value
    env.update(spec.environment_variables)
    bindir = str(Path(sys.executable).parent)
    path = env.get("PATH", os.defpath).split(os.pathsep)
    if path[:1] != [bindir]:
        env["PATH"] = os.pathsep.join([bindir, *path])
    env.setdefault("PYTHONUNBUFFERED", "1")  # rank output reaches the console line by line
    return stored_code_env(spec.code, env, spec.environment_variables)  # registry code: no stored bytecode runs


def prepare(spec: ComponentSpec, topology: Topology, values: Mapping[str, Any], outputs: Mapping[str, str],
            job_dir: Path, job_id: str, attempt: int = 0, max_restarts: int = 0,
            outer: Mapping[str, str] | None = None, extra: Mapping[str, str] | None = None) -> tuple[Launch, ...]:
    """Write the topology's files into ``job_dir`` and make one Launch per replica."""
    binding = bindings(topology, job_dir, job_id, attempt, max_restarts)
    job_dir.mkdir(parents=True, exist_ok=True)
    for name, content in topology.files.items():
        (job_dir / name).write_text(bind(content, binding), encoding="utf-8")
    common = base_env(spec, topology, os.environ if outer is None else outer)
    common.update(extra or {})
    launches = []
    command = spec.render(values, outputs)  # the same for every rank: a shell, when used, fills $NAME from its env
    for replica in topology.replicas:
        env = {**common, **{k: bind(v, binding) for k, v in replica.env.items()}}
        env.update(rankwatch.hook_env(replica.rank_hooks, str(job_dir / RANK_EXITS), env))
        argv: list[str] = []
        for item in replica.argv:
            if item == COMMAND:
                argv.extend(command)
            else:
                argv.append(bind(item, binding))
        launches.append(Launch(replica, tuple(argv), env, spec.code))
    return tuple(launches)
