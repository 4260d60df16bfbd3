"""ComponentSpec: the one immutable, dialect-free model every spec loads into."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Callable, Literal, Mapping

from ..errors import UsageError
from ._template import CommandTemplate, Ref
from ._types import NO_LAUNCHER
from ._render import render_value

_EMPTY: Mapping[str, Any] = MappingProxyType({})


def frozen_map(data: Mapping[str, Any] | None) -> Mapping[str, Any]:
    """A read-only copy, so a record never shares a dict with its caller."""
    return MappingProxyType(dict(data)) if data else _EMPTY


@dataclass(frozen=True)
class InputSpec:
    """One input: a parameter (string, integer, number, boolean, enum) or a port."""

    name: str
    type: str  # canonical parameter type, or the port type as written (e.g. "uri_folder", "AnyDirectory")
    kind: Literal["parameter", "port"]
    holds: Literal["folder", "file", "any"] | None = None  # ports only
    description: str | None = None
    default: Any = None  # already of the input's type; for a port, a path or URI
    optional: bool = False
    enum: tuple[str, ...] | None = None
    min: int | float | None = None
    max: int | float | None = None

    @property
    def is_port(self) -> bool:
        return self.kind == "port"


@dataclass(frozen=True)
class OutputSpec:
    name: str
    type: str
    holds: Literal["folder", "file", "any"] = "folder"
    description: str | None = None
    # where a job writes it and how (azure-ai-ml's ``path: azureml://datastores/...``, ``mode:``), as written
    path: str | None = None
    mode: str | None = None


@dataclass(frozen=True)
class EnvironmentSpec:
    """Where the command runs: a named/registered environment, an image, a conda spec."""

    name: str | None = None
    version: str | None = None
    image: str | None = None
    conda_file: str | None = None
    conda: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)
    reference: str | None = None  # e.g. "azureml:AzureML-Minimal:1" as written
    # a Docker build context: azure-ai-ml's {path, dockerfile_path}, path relative to the spec (or a URL)
    build: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)


@dataclass(frozen=True)
class RoleSpec:
    """Per-role settings of the distributed-job draft (launcher, worker, parameter_server)."""

    name: str
    count: int | None = None
    resources: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)
    environment: EnvironmentSpec | None = None
    environment_variables: Mapping[str, str] = field(default_factory=lambda: _EMPTY)


@dataclass(frozen=True)
class Distribution:
    """How the job is spread: launcher type and replica counts (overridable at run time)."""

    launcher: str  # canonical: mpi, torch.distributed, tensorflow.distributed, deepspeed, or a plugin's
    nodes: int = 1
    processes_per_node: int | None = None  # None: the launcher's default
    worker_count: int | None = None  # TensorFlow: total workers
    parameter_server_count: int = 0
    roles: tuple[RoleSpec, ...] = ()
    # where processes_per_node came from when the spec did not write it (seed 003: an MPI
    # worker's slots are its GPUs), for messages; None: written, given at run time, or default
    slots_from: str | None = None
    # how many times a failed job starts again, all ranks on all nodes (``launcher.max_restarts``);
    # None: not written (``--max-restarts`` or 0). A preemption or requeue is no failure.
    max_restarts: int | None = None
    # what the node agents watch (``launcher.system_metrics``, ``system_metrics_interval``,
    # ``hang_timeout``); None: not written (the flag's, else on at 10 s, and no hang timeout)
    system_metrics: bool | None = None
    system_metrics_interval: float | None = None
    hang_timeout: float | None = None

    def role(self, name: str) -> RoleSpec | None:
        return next((r for r in self.roles if r.name == name), None)

    @property
    def plain(self) -> bool:
        """No launcher: the command runs as one process on one node (``NO_LAUNCHER``)."""
        return self.launcher == NO_LAUNCHER


@dataclass(frozen=True)
class ComponentSpec:
    name: str
    command: CommandTemplate
    distribution: Distribution
    code: Path  # the folder the command runs in
    version: str | None = None
    display_name: str | None = None
    description: str | None = None
    tags: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    inputs: Mapping[str, InputSpec] = field(default_factory=lambda: _EMPTY)
    outputs: Mapping[str, OutputSpec] = field(default_factory=lambda: _EMPTY)
    environment: EnvironmentSpec | None = None
    environment_variables: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    resources: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)
    successful_return_code: Literal["Zero", "ZeroOrGreater"] = "Zero"
    is_deterministic: bool | None = None
    source: Path | None = None  # the spec file, when loaded from one
    # what a relative port default written in the spec (``path: ./data``) is relative to, as the
    # dialect's platform reads it (v2, draft: the YAML's folder); None: the caller's folder
    paths_base: Path | None = None

    @property
    def ref(self) -> str:
        return f"{self.name}@{self.version}" if self.version else self.name

    def with_overrides(self, *, nodes: int | None = None, processes_per_node: int | None = None) -> "ComponentSpec":
        """A copy with the node count / processes per node replaced (run/compile flags).

        Either one drops a TensorFlow worker count, so nodes x processes per node is the new one.
        A step without a launcher takes neither above 1 (UsageError): nothing would start the others."""
        dist = self.distribution
        if dist.plain and ((nodes or 1) > 1 or (processes_per_node or 1) > 1):
            asked = f"{nodes} nodes" if (nodes or 1) > 1 else f"{processes_per_node} processes per node"
            raise UsageError(f"{self.ref} has no distribution: it runs as one process on one node, and {asked} would "
                             "each run the whole step alone; give the spec a distribution (distribution: {type: "
                             "pytorch | mpi | tensorflow}) to run it on several, or drop the override")
        if nodes is not None or processes_per_node is not None:
            dist = dataclasses.replace(dist, worker_count=None)
        if nodes is not None:
            dist = dataclasses.replace(dist, nodes=nodes)
        if processes_per_node is not None:
            dist = dataclasses.replace(dist, processes_per_node=processes_per_node, slots_from=None)
        return dataclasses.replace(self, distribution=dist)

    def render(self, values: Mapping[str, Any], outputs: Mapping[str, str | Path]) -> list[str]:
        """What every rank executes for ``values`` (already typed, see ``bind_inputs``) and output
        paths: the command's words, or ``/bin/sh -c LINE`` when it uses the shell (``&&``,
        ``$RANK``, ...); the shell then fills ``$NAME`` from the rank's own environment."""
        return self.command.argv(self._lookup(values, outputs))

    def shell_line(self, values: Mapping[str, Any], outputs: Mapping[str, str | Path],
                   env: Mapping[str, str] | None = None) -> str:
        """The command line as the shell gets it, each value one quoted word (``env``: also
        fill those ``$NAME`` references, to show what one rank runs)."""
        return self.command.shell_line(self._lookup(values, outputs), env)

    @staticmethod
    def _lookup(values: Mapping[str, Any], outputs: Mapping[str, str | Path]) -> Callable[[Ref], str | None]:
        def lookup(ref: Ref) -> str | None:
            if ref.kind == "outputs":
                path = outputs.get(ref.name)
                return None if path is None else str(path)
            value = values.get(ref.name)
            return None if value is None else render_value(value)
        return lookup
