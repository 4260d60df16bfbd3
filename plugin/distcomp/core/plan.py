"""A job's plan, made once: the spec with its overrides and the Topology that runs it.

Every target receives a Plan, never a bare spec with a launcher to ask: the launcher's factory
is called here, the user's own launcher (``torchrun``/``mpirun`` in the command, seed 003)
takes its place here, and the warnings a job deserves are gathered here. So the same job has
the same world size, the same replicas and the same warnings on every target.

A replica that is one rank (``rank`` set, ``ranks`` 1) and whose env carries no launcher's rank
contract (``RANK``, ``OMPI_COMM_WORLD_RANK``, ``PMI_RANK``, ``TF_CONFIG``: a third-party
launcher's, such as the hookspec's ``mine``) gets distcomp's own (``RANK_ENV``), so that
``distcomp.runtime`` logs from its rank 0 only, on every target.

A role's own settings (seed 003's draft: ``parameter_server: {environment_variables,
environment, resources}``) are laid out here too, once: its variables go into the env of that
role's replicas (under the launcher's own, so TF_CONFIG stays the launcher's), and
``Topology.settings`` carries its variables, image and resources by replica role for the
targets that place pods. Variables that cannot reach their role alone (the role has no
process of its own, or one process such as ``mpirun`` starts it with others) are refused.

A spec without a launcher (``Distribution.plain``: a v2 command without ``distribution``) is
laid out here, not by a plugin: one process, the bare command (``plain_topology``), which each
target runs as its plainest job (``Topology.plain``), so none of them asks which launcher it is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping

from ..errors import JobError, UsageError
from ..records import Plan

if TYPE_CHECKING:
    from .plugins import PluginManager
    from ..records import Topology
    from ..spec import ComponentSpec

__all__ = ["Plan", "RANK_DEFAULTS", "RANK_ENV", "job_env", "make_plan", "plain_env", "plain_topology"]

# distcomp's rank contract, read by distcomp.runtime where no launcher's is present
RANK_ENV = ("DISTCOMP_RANK", "DISTCOMP_WORLD_SIZE", "DISTCOMP_LOCAL_RANK", "DISTCOMP_LOCAL_WORLD_SIZE",
            "DISTCOMP_NODE_RANK")
_CONTRACTS = ("RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "TF_CONFIG")
# what every rank gets unless the user sets it (the spec, --env, or the shell of a local run):
# MLflow's telemetry thread deadlocks with mlflow.autolog()'s import hooks in a DDP rank, which
# then hangs for ever (under plain torchrun too); distcomp's ranks must not hang on it
RANK_DEFAULTS = {"MLFLOW_DISABLE_TELEMETRY": "true"}


SYSTEM_METRICS_INTERVAL = 10.0  # seconds: MLflow's own default, and < 1 % of a core (benchmarks/system_metrics.py)


WATCH_OPTIONS = ("system_metrics", "system_metrics_interval", "hang_timeout")  # targets' options of those names


def watching(options: Mapping[str, Any]) -> dict[str, Any]:
    """make_plan's watch keywords from a target's bound options (None where not given)."""
    return {name: options.get(name) for name in WATCH_OPTIONS}


def _seconds(name: str, value: float | None, minimum: float) -> float | None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= minimum):
        raise UsageError(f"{name} must be a number >= {minimum:g} (got {value!r})")
    return None if value is None else float(value)


def _watching(spec: "ComponentSpec", on: bool | None, interval: float | None,
              hang: float | None) -> tuple[float | None, float | None]:
    """The system metrics' interval (None: off) and the hang timeout: each flag, else the spec's."""
    dist = spec.distribution
    if on is not None and not isinstance(on, bool):
        raise UsageError(f"system_metrics must be true or false (got {on!r})")
    interval = _seconds("system_metrics_interval", interval, 0.1)
    hang = _seconds("hang_timeout", hang, 1)
    sampling = on if on is not None else dist.system_metrics if dist.system_metrics is not None else True
    every = interval if interval is not None else dist.system_metrics_interval or SYSTEM_METRICS_INTERVAL
    return (float(every) if sampling else None), (hang if hang is not None else dist.hang_timeout)


def make_plan(spec: "ComponentSpec", *, nodes: int | None = None, nproc_per_node: int | None = None,
              env: Mapping[str, str] | None = None, gpu: bool | None = None,
              pm: "PluginManager | None" = None, max_restarts: int | None = None,
              system_metrics: bool | None = None, system_metrics_interval: float | None = None,
              hang_timeout: float | None = None) -> Plan:
    """The plan of ``spec`` with ``nodes``/``nproc_per_node`` overrides. ``env``: variables the
    ranks get (the advice reads them), ``gpu``: whether the machines have one (None: ask this
    machine), ``pm``: the plugins that know the launcher (default: the installed ones),
    ``max_restarts``: the ``--max-restarts`` given (None: the spec's, else 0);
    ``system_metrics``, ``system_metrics_interval``, ``hang_timeout``: the flags given (None: the
    spec's ``launcher.*``, else on, every ``SYSTEM_METRICS_INTERVAL`` s, and no hang timeout). An
    unknown launcher is a UsageError, and so is the command's own mpirun asking for more ranks
    than the nodes have slots; a plugin factory that fails is a JobError naming the plugin."""
    from . import advice as _advice
    from . import own
    from .plugins import PluginError, get_plugin_manager

    for name, value in (("nodes", nodes), ("nproc_per_node", nproc_per_node)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise UsageError(f"{name} must be an integer >= 1 (got {value!r})")
    if max_restarts is not None and (isinstance(max_restarts, bool) or not isinstance(max_restarts, int)
                                     or max_restarts < 0):
        raise UsageError(f"max_restarts must be an integer >= 0 (got {max_restarts!r})")
    restarts = max_restarts if max_restarts is not None else spec.distribution.max_restarts or 0
    sampling, hang = _watching(spec, system_metrics, system_metrics_interval, hang_timeout)
    spec = spec.with_overrides(nodes=nodes, processes_per_node=nproc_per_node)
    name, provider = spec.distribution.launcher, "distcomp"
    if spec.distribution.plain:  # no launcher: the core lays out its one process, as for every target
        topology = plain_topology(spec)
    else:
        try:
            launcher = (pm or get_plugin_manager()).launcher(spec.distribution.launcher)
        except PluginError as exc:
            raise UsageError(str(exc)) from None
        name, provider = launcher.type.name, launcher.provider
        try:
            topology = launcher.type.factory(spec)
        except Exception as exc:  # a plugin's factory: name it, do not crash
            raise JobError(f"launcher {name!r} from {provider} could not lay out the job: "
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
    user = {**spec.environment_variables, **(env or {})}
    topology = _with_defaults(_with_role_settings(spec, _with_rank_env(topology)),
                              {k: v for k, v in RANK_DEFAULTS.items() if k not in user})
    return Plan(spec, topology, name, provider, found, tuple(warnings), restarts, sampling, hang)


# a spec's role name -> the role its replicas carry (TF_CONFIG's "ps"); others are the same
REPLICA_ROLE = {"parameter_server": "ps"}


def replica_role(role: str) -> str:
    """The role of the replicas that play the spec's role ``role``."""
    return REPLICA_ROLE.get(role, role)


def _with_role_settings(spec: "ComponentSpec", topology: "Topology") -> "Topology":
    """``topology`` with each spec role's own variables in its replicas' env, and its settings
    in ``Topology.settings``; a UsageError where a role's variables would reach other roles or none."""
    from dataclasses import replace

    from ..records import RoleSettings

    settings: dict[str, RoleSettings] = {}
    env_of: dict[str, dict[str, str]] = {}
    for role in spec.distribution.roles:
        image = role.environment.image if role.environment is not None else None
        if not (role.environment_variables or image or role.resources):
            continue
        name = replica_role(role.name)
        where = f"distributed.{_framework(spec)}.{role.name}"
        settings[name] = RoleSettings(role.environment_variables, image, role.resources, where)
        if role.environment_variables:
            _check_env_reaches(topology, name, where)
            env_of[name] = dict(role.environment_variables)
    if not settings:
        return topology
    replicas = tuple(replace(r, env={**env_of[r.role], **r.env}) if r.role in env_of else r
                     for r in topology.replicas)
    return replace(topology, replicas=replicas, settings=settings)


def _framework(spec: "ComponentSpec") -> str:
    """How the draft names the launcher (``distributed: tensorflow:``), for messages."""
    return {"tensorflow.distributed": "tensorflow", "torch.distributed": "pytorch"}.get(
        spec.distribution.launcher, spec.distribution.launcher)


def _check_env_reaches(topology: "Topology", role: str, where: str) -> None:
    """A role's variables need processes of that role alone: refuse them where none exists, or
    where a process of the role also starts other ranks (``mpirun``: they inherit its env)."""
    mine = [r for r in topology.replicas if r.role == role]
    wrappers = [r for r in topology.replicas if r.rank is None and not r.service]  # mpirun, the user's launcher
    if not mine or any(any(r is w for w in wrappers) for r in mine):
        starters = sorted({w.role for w in wrappers})
        how = (f"its ranks are started by the {' and '.join(starters)} process(es), which pass their env to every "
               "rank they start" if starters else f"the job has no {role} process (it has: "
               f"{', '.join(topology.roles())})")
        raise UsageError(f"{where}.environment_variables: the {topology.launcher} job cannot give the {role} role "
                         f"variables of its own: {how}; move them to the job's environment_variables")


def plain_topology(spec: "ComponentSpec") -> "Topology":
    """The layout of a step without a launcher: its command, once, as rank 0 of 1 on node 0."""
    from ..records import Replica, Topology

    return Topology(launcher=spec.distribution.launcher, nodes=1, processes_per_node=1, world_size=1,
                    replicas=(Replica(role="worker", index=0, node=0, rank=0),))


def plain_env(topology: "Topology") -> dict[str, str]:
    """What the one process of a plain topology needs beyond distcomp's rank 0 of 1, which
    ``distcomp.runtime`` reads where no variable says otherwise: a platform's plainest job
    (Azure ML's command job, a one-pod Kubeflow job) sets only these."""
    return {k: v for k, v in topology.replicas[0].env.items() if k not in RANK_ENV}


def job_env(spec: "ComponentSpec", extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The variables of a platform that gives all of a job's processes one env (a Kubeflow
    operator's replicas, an Azure ML job): the spec's, ``extra`` over them, and distcomp's rank
    defaults (``RANK_DEFAULTS``) where neither sets one, as ``make_plan`` gives every replica."""
    given = {**spec.environment_variables, **(extra or {})}
    return {**{k: v for k, v in RANK_DEFAULTS.items() if k not in given}, **given}


def _with_defaults(topology: "Topology", defaults: Mapping[str, str]) -> "Topology":
    """``topology`` with ``defaults`` in every replica's env (where the replica sets none of them):
    the replicas' env reaches the ranks on every target."""
    from dataclasses import replace

    if not defaults:
        return topology
    return replace(topology, replicas=tuple(replace(r, env={**defaults, **r.env}) for r in topology.replicas))


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
