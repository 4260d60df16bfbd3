"""Every record type of distcomp, in one module below the core: what plugins exchange with
it (a launcher type and the Topology it makes, the Plan), one job-state vocabulary for every
target (``JobState``, ``JobOutcome``), and what a run of a Topology's processes ends with
(each process's end, the root cause of a failure, the result).

A Topology is target-neutral: addresses, ports, the job folder and the component's own
command appear in it as placeholders (``{{host:0}}``, ``{{port:master}}``, ``{{job_dir}}``,
``{{command}}``) that a target fills into a copy at the last moment, never by string
concatenation of user values and never through a shell.
"""

from __future__ import annotations

import enum
import re
import signal as _signal
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping

from .agent.shared import COMMAND as COMMAND, PLACEHOLDER as _PLACEHOLDER
from .agent.shared import bind as _bind
from .errors import UsageError

if TYPE_CHECKING:
    from .base.redact import Masker
    from .registry._store import RegistryStore
    from .spec import ComponentSpec

__all__ = [
    "COMMAND", "JOB_DIR", "JOB_ID", "JobOptions", "KubeflowJobType", "LauncherType", "MAX_RESTARTS", "OwnLauncher", "Plan", "PlaceholderError",
    "RESTART", "RankFailure", "RegistryStoreType", "Replica", "RoleSettings", "Topology", "bind", "host", "node_name", "port", "placeholders",
    # a job's state and outcome
    "JobOutcome", "JobState", "TrackingRef",
    # what a run of a Topology's processes ends with
    "Failure", "FoundOutput", "ProcessResult", "RunResult", "State", "describe_exit", "describe_signal",
]

# \Z, not $: "$" would also accept a name that ends in a newline
_NAME = re.compile(r"^[a-z][a-z0-9_.-]*\Z")
_ENV = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\Z")
_ROLE = re.compile(r"^[a-z][a-z0-9_-]*\Z")
_SCHEME = re.compile(r"^[a-z][a-z0-9+.-]*\Z")
# the placeholders ({{kind}} or {{kind:arg}}, fixed kinds) and COMMAND, the whole argv item the
# component's rendered command goes in: in distcomp.agent.shared, which the stdlib-only agent shares
JOB_DIR = "{{job_dir}}"  # the job's folder (where the target writes Topology.files)
JOB_ID = "{{job_id}}"
RESTART = "{{restart}}"  # 0 on the first attempt, then 1, 2, ...
MAX_RESTARTS = "{{max_restarts}}"


def host(node: int) -> str:
    """The address of node ``node`` (127.0.0.1 locally, a pod's DNS name in a cluster)."""
    return f"{{{{host:{node}}}}}"


def node_name(node: int) -> str:
    """The host name of node ``node`` as a hostfile lists it."""
    return f"{{{{node:{node}}}}}"


def port(name: str) -> str:
    """A port the target allocates once per job attempt, declared in ``Topology.ports``."""
    return f"{{{{port:{name}}}}}"


class PlaceholderError(UsageError, ValueError):
    pass


def placeholders(text: str) -> list[tuple[str, str | None]]:
    """The ``(kind, arg)`` of every placeholder in ``text``."""
    return [(m.group(1), m.group(2)) for m in _PLACEHOLDER.finditer(text)]


def bind(text: str, values: Mapping[str, str]) -> str:
    """``text`` with each placeholder replaced from ``values`` (keys ``host:0``, ``job_dir``...)."""
    return _bind(text, values, PlaceholderError)


def _frozen(env: Mapping[str, str], what: str) -> Mapping[str, str]:
    for k, v in env.items():
        if not isinstance(k, str) or not _ENV.match(k):
            raise ValueError(f"{what}: {k!r} is not an environment variable name")
        if not isinstance(v, str):
            raise ValueError(f"{what}: {k}={v!r} must be a string (got {type(v).__name__})")
    return MappingProxyType(dict(env))


_EMPTY: Mapping[str, str] = MappingProxyType({})


@dataclass(frozen=True)
class RankFailure:
    """What a process that hosts several ranks (``mpirun``) said about the rank that ended the job."""

    rank: int
    exit_code: int | None  # negative: killed by that signal; None: the wrapper's own exit code stands
    detail: str  # the wrapper's words, e.g. "mpirun: rank 1 exited with code 3"
    pid: int | None = None  # the rank's own pid, when the wrapper names it


# A wrapper's output demultiplexer: the rank a raw output line came from and the line without
# the wrapper's tag, or None for the wrapper's own lines. A target routes each line by it.
RankLine = Callable[[bytes], "tuple[int, bytes] | None"]
# A wrapper's failure parser: from its whole log text (whitespace folded), the rank it blames
FailureParser = Callable[[str], "RankFailure | None"]


def _prefix_router(tag: "re.Pattern[bytes]") -> RankLine:
    def route(raw: bytes) -> "tuple[int, bytes] | None":
        m = tag.match(raw)
        return (int(m.group("rank")), raw[m.end():]) if m else None
    return route


@dataclass(frozen=True)
class Replica:
    """One process the job starts: a rank, a TF task, or a wrapper such as ``mpirun``."""

    role: str  # worker, chief, ps, evaluator, launcher, ...
    index: int  # within its role
    node: int  # which node it runs on
    argv: tuple[str, ...] = (COMMAND,)
    env: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    rank: int | None = None  # its global rank when the process is one rank
    ranks: int = 1  # how many ranks it hosts (mpirun: all of them)
    service: bool = False  # serves the others and is stopped once they finish (TF parameter servers)
    # a process hosting several ranks says which rank each line and the failure came from; the
    # launcher knows its wrapper's format, so targets route by these and name no launcher
    output: RankLine | None = None
    failure: FailureParser | None = None
    # the same routing as data, for a target whose node agent cannot call ``output`` (it runs on
    # the standard library alone, apart from the launcher): a regular expression matching a
    # line's tag, its group ``rank`` the rank (``^\[\d+,(?P<rank>\d+)\]<stdout>: ?``); with no
    # ``output``, it is ``output`` too
    rank_prefix: str | None = None
    # a wrapper that starts ranks itself (mpirun) and can put a program in front of each, named
    # in these variables (Open MPI's exec agent): a target that supervises its ranks sets them to
    # distcomp's rank watcher (``distcomp.agent.rankwatch``), so the first rank to fail ends the
    # job at once, and not only when the wrapper ends it
    rank_hooks: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not _ROLE.match(self.role):
            raise ValueError(f"Replica.role {self.role!r}: expected lowercase letters, digits, '_' or '-'")
        if self.index < 0 or self.node < 0 or self.ranks < 1:
            raise ValueError(f"Replica {self.role}{self.index}: index and node must be >= 0 and ranks >= 1")
        argv = tuple(self.argv)
        if not argv or not all(isinstance(a, str) for a in argv):
            raise ValueError(f"Replica {self.role}{self.index}: argv must be a non-empty list of strings")
        if argv.count(COMMAND) != 1:
            raise ValueError(f"Replica {self.role}{self.index}: argv must hold {COMMAND} exactly once, as a whole item")
        object.__setattr__(self, "argv", argv)
        object.__setattr__(self, "env", _frozen(self.env, f"Replica {self.role}{self.index} env"))
        hooks = (self.rank_hooks,) if isinstance(self.rank_hooks, str) else tuple(self.rank_hooks)
        if not all(isinstance(h, str) and _ENV.match(h) for h in hooks):
            raise ValueError(f"Replica {self.role}{self.index}: rank_hooks must be environment variable names")
        object.__setattr__(self, "rank_hooks", hooks)
        if self.rank_prefix is not None:
            try:
                tag = re.compile(self.rank_prefix.encode("ascii"))
            except (re.error, UnicodeEncodeError) as exc:
                raise ValueError(f"Replica {self.role}{self.index}: rank_prefix is not an ASCII regular "
                                 f"expression ({exc})") from None
            if "rank" not in tag.groupindex:
                raise ValueError(f"Replica {self.role}{self.index}: rank_prefix needs a group named 'rank'")
            if self.output is None:
                object.__setattr__(self, "output", _prefix_router(tag))
        for what in ("output", "failure"):
            if getattr(self, what) is not None and not callable(getattr(self, what)):
                raise ValueError(f"Replica {self.role}{self.index}: {what} must be a function or None")

    @property
    def name(self) -> str:
        """``rank3`` for a rank, else role and index (``ps0``, ``launcher0``)."""
        return f"rank{self.rank}" if self.rank is not None else f"{self.role}{self.index}"


@dataclass(frozen=True)
class RoleSettings:
    """What a spec gives one role of its own (seed 003's draft: ``parameter_server:
    {environment_variables, environment, resources}``), keyed in ``Topology.settings`` by the
    replicas' role (``ps``). ``env`` is already in those replicas' env (under the launcher's);
    a target reads ``image`` and ``resources`` here, never from the spec's roles."""

    env: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    image: str | None = None
    resources: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    source: str = ""  # where the spec says it, for messages: "distributed.tensorflow.parameter_server"

    def __post_init__(self) -> None:
        object.__setattr__(self, "env", _frozen(self.env, f"RoleSettings {self.source} env"))
        object.__setattr__(self, "resources", MappingProxyType(dict(self.resources)))


@dataclass(frozen=True)
class Topology:
    """What a launcher factory makes of a ComponentSpec: the replicas and what they need."""

    launcher: str
    nodes: int
    processes_per_node: int
    world_size: int
    replicas: tuple[Replica, ...]
    files: Mapping[str, str] = field(default_factory=lambda: _EMPTY)  # job-dir file -> content
    ports: tuple[str, ...] = ()  # names the target allocates, used as {{port:NAME}}
    local_env: Mapping[str, str] = field(default_factory=lambda: _EMPTY)  # only when all nodes share one machine
    # replica role -> what the spec gives that role of its own (the Plan fills it in)
    settings: Mapping[str, RoleSettings] = field(default_factory=lambda: MappingProxyType({}))

    def __post_init__(self) -> None:
        if self.nodes < 1 or self.processes_per_node < 1 or self.world_size < 1:
            raise ValueError("Topology: nodes, processes_per_node and world_size must be >= 1")
        replicas = tuple(self.replicas)
        if not replicas or all(r.service for r in replicas):
            raise ValueError("Topology: needs at least one replica that is not a service")
        seen = {(r.role, r.index) for r in replicas}
        if len(seen) != len(replicas):
            raise ValueError("Topology: two replicas share a role and index")
        object.__setattr__(self, "replicas", replicas)
        object.__setattr__(self, "ports", tuple(self.ports))
        object.__setattr__(self, "local_env", _frozen(self.local_env, "Topology.local_env"))
        for name in self.files:
            if not re.match(r"^[A-Za-z0-9_.-]+\Z", name) or name in (".", ".."):
                raise ValueError(f"Topology.files: {name!r} must be a plain file name")
        object.__setattr__(self, "files", MappingProxyType(dict(self.files)))
        object.__setattr__(self, "settings", MappingProxyType(dict(self.settings)))
        used = {arg for r in replicas for text in (*r.argv, *r.env.values()) for kind, arg in placeholders(text)
                if kind == "port"}
        used |= {arg for text in self.files.values() for kind, arg in placeholders(text) if kind == "port"}
        missing = sorted(str(u) for u in used - set(self.ports))
        if missing:
            raise ValueError(f"Topology: ports used but not declared in Topology.ports: {', '.join(missing)}")

    @property
    def plain(self) -> bool:
        """One process running the bare command on one node, with nothing to wire (no port, no
        file, no other replica): a target runs it as its plainest job (Azure ML: a command job
        without distribution; Kubeflow: a one-pod job running the command itself)."""
        (first, *rest) = self.replicas
        return (self.nodes == 1 and not rest and first.argv == (COMMAND,) and first.ranks == 1 and not self.ports
                and not self.files)

    def roles(self) -> dict[str, int]:
        """Replica count per role, in order of first appearance."""
        out: dict[str, int] = {}
        for r in self.replicas:
            out[r.role] = out.get(r.role, 0) + 1
        return out


Factory = Callable[["ComponentSpec"], Topology]


@dataclass(frozen=True)
class LauncherType:
    """A launcher a plugin provides: its name, the aliases users may write, and its factory."""

    name: str
    factory: Factory
    aliases: tuple[str, ...] = ()
    description: str = ""

    def __post_init__(self) -> None:
        aliases = tuple(self.aliases) if not isinstance(self.aliases, str) else (self.aliases,)
        for n in (self.name, *aliases):
            if not isinstance(n, str) or not _NAME.match(n):
                raise ValueError(f"LauncherType name {n!r}: expected lowercase letters, digits, '.', '_' or '-',"
                                 " starting with a letter")
        if not callable(self.factory):
            raise ValueError(f"LauncherType {self.name!r}: factory must be callable (got {type(self.factory).__name__})")
        object.__setattr__(self, "aliases", tuple(dict.fromkeys(a for a in aliases if a != self.name)))

    def names(self) -> Iterable[str]:
        return (self.name, *self.aliases)


@dataclass(frozen=True)
class OwnLauncher:
    """The launcher a command starts itself (``torchrun``, ``mpirun``: seed 003's job style), and
    what its flags say of the job's shape. ``distcomp.core.own`` finds it; the Plan carries it
    (``Plan.own``), so a target reads it without asking a launcher module."""

    program: str  # as a person would name it: "torchrun", "python -m torch.distributed.launch", "mpirun"
    once: bool  # MPI-style: once on the first node; else once per node
    processes_per_node: int | None = None  # torch-style: --nproc-per-node (None: not a number)
    nodes: int | None = None  # torch-style: --nnodes
    processes: int | None = None  # MPI-style: -np, every rank of the job
    # MPI-style: the line places ranks beyond AZUREML_MPI_HOSTFILE's slots itself (--oversubscribe,
    # its own --host list or hostfile), so distcomp cannot hold -np against the slots
    own_slots: bool = False

    def describe(self) -> str:
        return f"the command's own {self.program}, " + ("once on the first node" if self.once else "once per node")


@dataclass(frozen=True)
class Plan:
    """What runs (made by ``distcomp.core.plan.make_plan``; kept here, below the target contract that
    carries it): the spec (overrides applied), its Topology, and what the user should know."""

    spec: "ComponentSpec"
    topology: "Topology"
    launcher: str  # the canonical name of the spec's launcher
    provider: str  # the plugin that provides it ("distcomp" for the built-ins)
    own: "OwnLauncher | None" = None  # the launcher the command starts itself (torchrun, mpirun), if any
    warnings: tuple[str, ...] = ()  # the own launcher's contradictions, then the launcher advice
    # how many times a failed job starts again, every rank on every node: ``--max-restarts``, else
    # the spec's ``launcher.max_restarts``, else 0. Preemptions and requeues do not count.
    max_restarts: int = 0
    # seconds between two samples of every node's system metrics (None: off); and how long no
    # rank may make progress before the job is ended as hung (None: never). Flag > spec > default.
    system_metrics_interval: float | None = None
    hang_timeout: float | None = None

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


@dataclass(frozen=True)
class JobOptions:
    """What a cluster job needs beyond the spec: its name, image, the rendered command, the
    job's layout (the Plan's Topology) and the env and resources of every pod."""

    name: str
    image: str
    command: tuple[str, ...]  # the user's argv, inputs and outputs already rendered
    # the job's Topology, the Plan's (the target fills it in): builders read the node count, the
    # processes per node, the roles and each replica's argv from it, never from the spec or a
    # launcher module, so a cluster job matches a local run
    topology: Topology
    namespace: str | None = None
    env: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    workdir: str | None = None
    resources: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))  # per pod
    # PVC claim name -> mount path in every pod: storage the pods share with whoever else mounts it
    volumes: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    # the job type being built: its runtime (Trainer v2), kind and API version
    job: "KubeflowJobType | None" = None
    # the launcher the command starts itself (the Plan's ``own``): a builder runs it as it is,
    # without a launcher of its own around it
    own: OwnLauncher | None = None
    # the Plan's: seconds between two samples of each node's system metrics (None: off); the
    # node agent in each pod samples its node while the job is tracked
    system_metrics_interval: float | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "command", tuple(self.command))
        object.__setattr__(self, "env", _frozen(self.env, f"JobOptions {self.name!r} env"))
        object.__setattr__(self, "resources", MappingProxyType(dict(self.resources)))
        for claim, path in self.volumes.items():
            if not (isinstance(claim, str) and claim and isinstance(path, str) and path.startswith("/")):
                raise ValueError(f"JobOptions {self.name!r} volumes: {claim!r} -> {path!r} must be a claim name "
                                 "and an absolute mount path")
        object.__setattr__(self, "volumes", MappingProxyType(dict(self.volumes)))

    @property
    def nodes(self) -> int:
        """The Topology's node count."""
        return self.topology.nodes

    @property
    def processes_per_node(self) -> int:
        """The Topology's processes per node."""
        return self.topology.processes_per_node


KubeflowBuild = Callable[["ComponentSpec", JobOptions], Mapping[str, Any]]
_API_VERSION = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[a-z0-9]+\Z")
_PLURAL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?\Z")


@dataclass(frozen=True)
class KubeflowJobType:
    """How a launcher runs as a Kubeflow training job: the kind, a builder of its manifest, and
    what ``distcomp submit`` needs to create it and follow it, so no target keeps a table of kinds.

    ``api_version``: the kind's ``group/version`` (``kubeflow.org/v1``); ``plural``: its resource
    name in the API's URLs (default: the kind in lowercase plus "s", Kubernetes' convention);
    ``leader``: the label selector of the pod whose log tells the job's story, ``{name}`` standing
    for the job's name (empty: no log is read); ``runtime``: the Trainer v2 runtime a TrainJob
    names in ``runtimeRef`` (``torch-distributed``), None for other kinds. ``build`` None: the
    Kubeflow target builds the kind itself (PyTorchJob, MPIJob, TFJob and TrainJob). A launcher
    never makes one: it declares a ``distcomp.core.kinds.NativeMapping`` for platform ``kubeflow``,
    which ``distcomp.core.kinds.kubeflow_job`` turns into this record for the target."""

    launcher: str  # the canonical launcher name it serves
    kind: str  # PyTorchJob, MPIJob, TFJob, TrainJob, ...
    build: KubeflowBuild | None = None
    description: str = ""
    api_version: str = ""
    plural: str = ""
    leader: str = ""
    runtime: str | None = None

    def __post_init__(self) -> None:
        what = f"KubeflowJobType {self.launcher}/{self.kind}"
        if self.build is not None and not callable(self.build):
            raise ValueError(f"{what}: build must be callable (or None: a kind the Kubeflow target builds)")
        if not re.match(r"^[A-Z][A-Za-z0-9]*\Z", self.kind):
            raise ValueError(f"{what}: kind must be a Kubernetes kind (CamelCase letters and digits, e.g. PyTorchJob)")
        if self.api_version and not _API_VERSION.match(self.api_version):
            raise ValueError(f"{what}: api_version {self.api_version!r} must be GROUP/VERSION (e.g. kubeflow.org/v1)")
        plural = self.plural or self.kind.lower() + "s"
        if not _PLURAL.match(plural):
            raise ValueError(f"{what}: plural {plural!r} must be the lowercase resource name (e.g. pytorchjobs)")
        object.__setattr__(self, "plural", plural)
        if self.runtime is not None and not (isinstance(self.runtime, str) and _PLURAL.match(self.runtime)):
            raise ValueError(f"{what}: runtime {self.runtime!r} must name a Trainer runtime (e.g. torch-distributed)")

    @property
    def group(self) -> str:
        return self.api_version.partition("/")[0]

    @property
    def version(self) -> str:
        return self.api_version.partition("/")[2]

    def leader_selector(self, name: str) -> str:
        """``leader`` for job ``name`` (a label selector; "" when the record names no leader)."""
        return self.leader.replace("{name}", name)


@dataclass(frozen=True)
class RegistryStoreType:
    """Where the component registry keeps versions: ``factory(location)`` returns the store
    (a ``distcomp.registry.RegistryStore``) for a registry location ``SCHEME://...``."""

    scheme: str
    factory: Callable[[str], "RegistryStore"]
    description: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.scheme, str) or not _SCHEME.match(self.scheme):
            raise ValueError(f"RegistryStoreType scheme {self.scheme!r}: expected a URI scheme (lowercase letters, "
                             "digits, '+', '.' or '-', starting with a letter)")
        if not callable(self.factory):
            raise ValueError(f"RegistryStoreType {self.scheme!r}: factory must be callable")


# -- a job's state: One job-state vocabulary for every target, the CLI, status.json and the job's MLflow run.
# ``JobState`` says where a job is (TorchX's ``AppState`` in spirit); ``JobOutcome`` is what a
# target reports about a job, during it (state ``running``) or at its end. The values are the
# lowercase words status.json and the ``distcomp.state`` tag have always held, so a
# ``JobState`` compares equal to them (``JobState.SUCCEEDED == "succeeded"``).

class JobState(str, enum.Enum):
    PENDING = "pending"  # submitted, nothing runs yet (a queue, pods being scheduled)
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    TIMED_OUT = "timed_out"  # its deadline passed; it was stopped
    CANCELLED = "cancelled"  # stopped on request: Ctrl-C, `distcomp cancel`
    # stopped on notice (SIGTERM to `distcomp run`, a scheduler's preemption) with its checkpoint
    # kept: no failure, and resumable (`distcomp run --resume`) in the same MLflow run
    PREEMPTED = "preempted"
    UNKNOWN = "unknown"  # the target cannot tell (its record is gone or unreadable)

    def __str__(self) -> str:
        return self.value

    @property
    def terminal(self) -> bool:
        return self in (JobState.SUCCEEDED, JobState.FAILED, JobState.TIMED_OUT, JobState.CANCELLED,
                        JobState.PREEMPTED)

    @property
    def mlflow_status(self) -> str:
        """The MLflow run status of a job in this state."""
        return _MLFLOW[self]

    def exit_code(self, signal: int | None = None) -> int:
        """What ``distcomp run``/``submit`` exit with: 0, 1, 124 (as ``timeout``), 128+signal."""
        if self is JobState.CANCELLED:
            return 128 + (signal or _signal.SIGINT)
        return _EXIT.get(self, 1)

    @classmethod
    def parse(cls, value: str) -> "JobState":
        """A state as stored; the word earlier versions wrote for a cancelled job is read too."""
        return cls(_OLD.get(value, value))


_MLFLOW = {JobState.PENDING: "SCHEDULED", JobState.RUNNING: "RUNNING", JobState.SUCCEEDED: "FINISHED",
           JobState.FAILED: "FAILED", JobState.TIMED_OUT: "FAILED", JobState.CANCELLED: "KILLED",
           JobState.PREEMPTED: "KILLED", JobState.UNKNOWN: "RUNNING"}
_EXIT = {JobState.SUCCEEDED: 0, JobState.FAILED: 1, JobState.TIMED_OUT: 124, JobState.PREEMPTED: 143}
_OLD = {"interrupted": "cancelled"}


@dataclass(frozen=True)
class TrackingRef:
    """The job's one MLflow run."""

    run_id: str
    tracking_uri: str
    experiment_id: str = ""


@dataclass(frozen=True)
class JobOutcome:
    """A job as its target sees it: where it is, and once it ended, how and why."""

    job_id: str  # TARGET:ID, what `distcomp status|logs|cancel` take
    state: JobState
    exit_code: int | None = None  # None while it runs
    root_cause: str = ""  # the first failure: which rank, on which node, its last lines
    message: str = ""  # the target's own word on the state (a condition, a reason)
    outputs: Mapping[str, str] = field(default_factory=dict)  # output name -> where it is
    started: float | None = None  # epoch seconds
    ended: float | None = None
    wall_s: float | None = None
    tracking: TrackingRef | None = None
    details: Mapping[str, Any] = field(default_factory=dict)  # the target's own record (status.json, ...)
    # what only the target knows of the end, tagged on the job's run as it ends (attempts, the failing process)
    end_tags: Mapping[str, str] = field(default_factory=dict)
    # why each attempt after the first started (a failure, a preemption, a requeue), in order;
    # None: the target cannot tell. The core tags the run with them (``core.restarts``)
    restarts: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "state", JobState.parse(str(self.state.value if isinstance(self.state, JobState)
                                                              else self.state)))
        if self.restarts is not None:
            object.__setattr__(self, "restarts", tuple(str(r) for r in self.restarts))
        object.__setattr__(self, "outputs", MappingProxyType(dict(self.outputs)))
        object.__setattr__(self, "details", MappingProxyType(dict(self.details)))
        object.__setattr__(self, "end_tags", MappingProxyType(dict(self.end_tags)))

    @property
    def done(self) -> bool:
        return self.state.terminal

    @property
    def succeeded(self) -> bool:
        return self.state is JobState.SUCCEEDED

    def to_json(self) -> dict[str, Any]:
        return {"job_id": self.job_id, "state": self.state.value, "exit_code": self.exit_code,
                "root_cause": self.root_cause, "message": self.message, "outputs": dict(self.outputs),
                "started": self.started, "ended": self.ended, "wall_s": self.wall_s,
                "tracking": asdict(self.tracking) if self.tracking else None, "details": dict(self.details),
                "restarts": list(self.restarts) if self.restarts is not None else None}

    def masked(self, masker: "Masker") -> "JobOutcome":
        """A copy safe to show: the job's secrets masked in its words and its target's record."""
        return replace(self, root_cause=masker.text(self.root_cause), message=masker.text(self.message),
                       details=masker.data(dict(self.details)),
                       restarts=tuple(map(masker.text, self.restarts)) if self.restarts is not None else None)

    def summary(self) -> str:
        """One line: ``JOB: succeeded in 3.1 s`` / ``JOB: failed: CAUSE``."""
        took = f" in {self.wall_s:.1f} s" if self.wall_s is not None and self.done else ""
        why = self.root_cause.splitlines()[0] if self.root_cause else self.message
        return f"{self.job_id}: {self.state.value}{took}" + (f": {why}" if why and not self.succeeded else "")


# -- What a run of a Topology's processes ends with: each process's end, the root cause of a
# failure, the result.
#
# Below every target and ``tracking``: the local target makes these records, a job's MLflow run
# is ended from them (``tracking``), and a target that starts processes elsewhere reports in them
# too, so no layer above needs the local target to read a result.

State = JobState  # running in status.json meanwhile; then succeeded, failed, timed_out or cancelled


def describe_signal(number: int | None) -> str:
    """``signal 9 (SIGKILL)``."""
    try:
        name = _signal.Signals(number or 0).name
    except ValueError:
        name = "unknown signal"
    return f"signal {number} ({name})"


def describe_exit(returncode: int) -> str:
    """``exited with code 3`` or ``was killed by signal 9 (SIGKILL)``."""
    return f"was killed by {describe_signal(-returncode)}" if returncode < 0 else f"exited with code {returncode}"


@dataclass(frozen=True)
class Failure:
    """The root cause of a failed attempt: the first rank (or process) to fail."""

    name: str  # rank1, ps0, launcher0
    role: str
    node: int
    returncode: int  # negative: killed by that signal
    log: Path
    tail: tuple[str, ...] = ()
    pid: int | None = None
    after: float = 0.0  # seconds since the attempt started
    detail: str = ""  # what the launcher itself said (mpirun's report)
    hung: bool = False  # it made no progress (--hang-timeout), and distcomp stopped it: ``returncode`` is ours

    def describe(self) -> str:
        where = f"{self.name} ({self.role}, node {self.node}" + (f", pid {self.pid})" if self.pid else ")")
        what = "hung and was stopped" if self.hung else describe_exit(self.returncode)
        lines = [f"{where} {what} after {self.after:.1f} s"]
        if self.detail:
            lines.append(f"  {self.detail}")
        if self.tail:
            source = str(self.log) if self.log.suffix == ".log" else f"its ranks' logs in {self.log}"  # a silent wrapper
            lines.append(f"  last lines of {source}:")
            lines += [f"    {line}" for line in self.tail]
        else:
            lines.append(f"  it printed nothing (log: {self.log})")
        return "\n".join(lines)


@dataclass(frozen=True)
class ProcessResult:
    name: str
    role: str
    node: int
    pid: int
    returncode: int | None  # None: still running when the job ended (it was then killed)
    log: Path


@dataclass(frozen=True)
class FoundOutput:
    """What an output already held when an attempt started (kept: a rank may resume from it)."""

    attempt: int  # 1-based, as the logs count
    output: str
    path: str
    files: int
    bytes: int


@dataclass(frozen=True)
class RunResult:
    state: State
    run_dir: Path
    attempts: int
    wall_s: float
    processes: tuple[ProcessResult, ...] = ()
    root_cause: Failure | None = None
    failures: tuple[Failure, ...] = ()  # root causes of earlier attempts that were restarted
    signal: int | None = None  # the signal that interrupted the job
    message: str = ""
    outputs: Mapping[str, str] = field(default_factory=dict)
    # output name -> its marker file, for every output a job that did not succeed may have left half-written
    incomplete_outputs: Mapping[str, str] = field(default_factory=dict)
    found_outputs: tuple[FoundOutput, ...] = ()
    port_retries: int = 0  # attempts started again because another program took a port
    # why each attempt after the first started (a failure, a preemption): one line each, in order
    restarts: tuple[str, ...] = ()
    failures_used: int = 0  # of those, the restarts after a failure (what max_restarts limits)

    def __post_init__(self) -> None:
        object.__setattr__(self, "state", JobState.parse(str(self.state)))

    @property
    def exit_code(self) -> int:
        return self.state.exit_code(self.signal)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["state"] = self.state.value
        data["exit_code"] = None if self.state == "running" else self.exit_code
        return _plain(data)


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return str(value) if isinstance(value, Path) else value
