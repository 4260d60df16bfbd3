"""A job's plan, made once: the spec with its overrides and the Topology that runs it.

Every target receives a Plan, never a bare spec with a launcher to ask: the launcher's factory
is called here, the user's own launcher (``torchrun``/``mpirun`` in the command, seed 003)
takes its place here, and the warnings a job deserves are gathered here. So the same job has
the same world size, the same replicas and the same warnings on every target.

A replica that is one rank (``rank`` set, ``ranks`` 1) and whose env carries no launcher's rank
contract (``RANK``, ``OMPI_COMM_WORLD_RANK``, ``PMI_RANK``, ``TF_CONFIG``: a third-party
launcher's, such as the hookspec's ``mine``) gets distcomp's own (``RANK_ENV``), so that
``distcomp.runtime`` logs from its rank 0 only, on every target.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Mapping

from .errors import JobError, UsageError

if TYPE_CHECKING:
    from .plugins import PluginManager
    from .records import OwnLauncher, Topology
    from .spec import ComponentSpec

__all__ = ["Plan", "RANK_ENV", "make_plan"]

# distcomp's rank contract, read by distcomp.runtime where no launcher's is present
RANK_ENV = ("DISTCOMP_RANK", "DISTCOMP_WORLD_SIZE", "DISTCOMP_LOCAL_RANK", "DISTCOMP_LOCAL_WORLD_SIZE",
            "DISTCOMP_NODE_RANK")
_CONTRACTS = ("RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "TF_CONFIG")


@dataclass(frozen=True)
class Plan:
    """What runs: the spec (overrides applied), its Topology, and what the user should know."""

    spec: "ComponentSpec"
    topology: "Topology"
    launcher: str  # the canonical name of the spec's launcher
    provider: str  # the plugin that provides it ("distcomp" for the built-ins)
    own: "OwnLauncher | None" = None  # the launcher the command starts itself (torchrun, mpirun), if any
    warnings: tuple[str, ...] = ()  # the own launcher's contradictions, then the launcher advice

    @property
    def processes_per_node(self) -> int:
        """How many processes run per node: the own launcher's count where it sets one."""
        return self.topology.processes_per_node

    @property
    def slots_per_node(self) -> int:
        """The ranks each node has room for: an MPI hostfile's ``slots=``, an MPIJob's
        ``slotsPerWorker``, Azure ML's ``process_count_per_instance``. The spec's processes per
        node, as written, overridden, or taken from its GPUs (``distribution.slots_from`` says)."""
        return self.spec.distribution.processes_per_node or 1

    def summary(self) -> str:
        """One line: ``ref: launcher, N node(s) x P process(es), world size W (roles)``."""
        t = self.topology
        roles = ", ".join(f"{n} {r}" for r, n in t.roles().items())
        return (f"{self.spec.ref}: {t.launcher}, {t.nodes} node(s) x {t.processes_per_node} process(es), "
                f"world size {t.world_size} ({roles})" + (f"; {self.own.describe()}" if self.own else ""))


def make_plan(spec: "ComponentSpec", *, nodes: int | None = None, nproc_per_node: int | None = None,
              env: Mapping[str, str] | None = None, gpu: bool | None = None,
              pm: "PluginManager | None" = None) -> Plan:
    """The plan of ``spec`` with ``nodes``/``nproc_per_node`` overrides. ``env``: variables the
    ranks get (the advice reads them), ``gpu``: whether the machines have one (None: ask this
    machine), ``pm``: the plugins that know the launcher (default: the installed ones). An
    unknown launcher is a UsageError, and so is the command's own mpirun asking for more ranks
    than the nodes have slots; a plugin factory that fails is a JobError naming the plugin."""
    from .launchers import _advice, own
    from .plugins import PluginError, get_plugin_manager

    for name, value in (("nodes", nodes), ("nproc_per_node", nproc_per_node)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise UsageError(f"{name} must be an integer >= 1 (got {value!r})")
    spec = spec.with_overrides(nodes=nodes, processes_per_node=nproc_per_node)
    try:
        launcher = (pm or get_plugin_manager()).launcher(spec.distribution.launcher)
    except PluginError as exc:
        raise UsageError(str(exc)) from None
    try:
        topology = launcher.type.factory(spec)
    except Exception as exc:  # a plugin's factory: name it, do not crash
        raise JobError(f"launcher {launcher.type.name!r} from {launcher.provider} could not lay out the job: "
                       f"{type(exc).__name__}: {exc}") from None
    warnings: list[str] = []
    found = own.find(spec)
    if found is not None:  # the command starts its own launcher: it takes the place of the spec's
        refused = own.refusal(spec, found)
        if refused is not None:
            raise UsageError(f"{spec.ref}: {refused}")
        topology = own.topology(spec, found, topology)
        warnings += own.problems(spec, found)
    warnings += _advice.advice(spec, env=env, gpu=gpu)
    return Plan(spec, _with_rank_env(topology), launcher.type.name, launcher.provider, found, tuple(warnings))


def _with_rank_env(topology: "Topology") -> "Topology":
    """``topology`` with distcomp's rank contract on each one-rank replica that has no other."""
    from dataclasses import replace

    bare = {id(r) for r in topology.replicas
            if r.rank is not None and r.ranks == 1 and not any(k in r.env for k in _CONTRACTS)}
    if not bare:
        return topology
    ranked = sorted((r for r in topology.replicas if r.rank is not None), key=lambda r: r.rank or 0)
    on_node: dict[int, list[int]] = {}
    for r in ranked:
        on_node.setdefault(r.node, []).append(r.rank or 0)
    replicas = []
    for r in topology.replicas:
        if id(r) in bare:
            mine = on_node[r.node]
            values = (r.rank, topology.world_size, mine.index(r.rank or 0), len(mine), r.node)
            r = replace(r, env={**dict(zip(RANK_ENV, map(str, values))), **r.env})
        replicas.append(r)
    return replace(topology, replicas=tuple(replicas))
