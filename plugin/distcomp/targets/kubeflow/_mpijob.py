"""MPIJob (kubeflow.org/v2beta1, mpi-operator 0.8), for any launcher whose ranks one mpirun starts.

The Launcher pod runs the Topology's one process as the launcher lays it out: the MPI
launcher's own ``mpirun --hostfile {{job_dir}}/hostfile --np N ... -x NAME {{command}}``, or the
user's own mpirun. Its placeholders are bound for the operator's pods: the Topology's hostfile
is the one the operator mounts at ``/etc/mpi/hostfile`` (one ``JOB-worker-N slots=M`` line per
Worker, so the Workers and their slots are the hostfile's nodes and slots), node N is Worker
N's DNS name, and each port a fixed number (each pod has a network of its own). Workers run
``sshd`` for it, so the image needs an ssh server. Ranks started over ssh get only what mpirun
forwards: each variable of the job that the launcher's mpirun does not forward gets a ``-x``."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from ...records import COMMAND, JOB_DIR, JobOptions, PlaceholderError, Replica, bind
from ._errors import CompileError
from ._pod import RUN_POLICY, container, escape, metadata, replica

if TYPE_CHECKING:
    from ...spec import ComponentSpec

HOSTFILE = "/etc/mpi/hostfile"  # where the operator mounts its hostfile in the launcher pod
SSHD = ("/usr/sbin/sshd", "-De")
PORT = 23456  # the Topology's first port; any number serves, nothing else listens in a pod
_LINE = re.compile(r"\{\{node:(\d+)\}\}\s+slots=(\d+)\Z")


def mpijob(spec: "ComponentSpec", options: JobOptions) -> dict[str, Any]:
    from ...core.plan import job_env

    topology = options.topology
    process = _launcher(options)
    hostfile, slots = hostfile_slots(options)
    values = {f"{kind}:{n}": worker_host(options.name, n) for n in range(topology.nodes) for kind in ("host", "node")}
    values |= {f"port:{p}": str(PORT + i) for i, p in enumerate(topology.ports)} | {"job_id": options.name}
    argv = [w if w == COMMAND else _bind(w, hostfile, values, options) for w in process.argv]
    env = job_env(spec, options.env)  # the spec's, --env, distcomp's rank defaults
    at = argv.index(COMMAND)
    if at and argv[0].rsplit("/", 1)[-1] == "mpirun":  # the launcher's mpirun; a user's own forwards its own
        forwarded = {argv[i + 1] for i in range(at - 1) if argv[i] == "-x"}
        argv[at:at] = [w for name in sorted(env) if name not in forwarded for w in ("-x", name)]
        at = argv.index(COMMAND)
    argv[at:at + 1] = options.command
    # the launcher's own variables (its words are literal: Kubernetes' $(NAME) escaped), then the job's
    own = {k: _bind(v, hostfile, values, options).replace("$", "$$") for k, v in process.env.items()}
    launcher = container("launcher", options, escape(argv), {**own, **env})
    worker = container("worker", options, SSHD, env)
    return {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "metadata": metadata(options, spec.name),
            # the launcher starts once every worker's sshd is up, so a failed mpirun is a real
            # failure, not a race: it fails the job as a failed rank does locally
            "spec": {"slotsPerWorker": slots, "mpiImplementation": "OpenMPI",
                     "launcherCreationPolicy": "WaitForWorkersReady", "runPolicy": dict(RUN_POLICY),
                     "mpiReplicaSpecs": {"Launcher": replica(1, launcher, options=options),
                                         "Worker": replica(topology.nodes, worker, options=options)}}}


def worker_host(job: str, node: int) -> str:
    """Node ``node``'s address: its Worker pod's name under the job's headless service, as the
    operator's hostfile names it (the pod's namespace is the resolver's search domain)."""
    return f"{job}-worker-{node}.{job}"


def _launcher(options: JobOptions) -> Replica:
    """The Topology's one process, which starts every rank (an mpirun) from the Launcher pod."""
    t = options.topology
    if len(t.replicas) != 1:
        roles = ", ".join(f"{n} {r}" for r, n in t.roles().items())
        raise CompileError(f"MPIJob {options.name}: launcher {t.launcher!r} lays out {len(t.replicas)} processes "
                           f"({roles}); an MPIJob's Launcher pod runs one, which starts every rank on the Workers "
                           "(an mpirun)")
    return t.replicas[0]


def hostfile_slots(options: JobOptions) -> tuple[str | None, int]:
    """The Topology's hostfile (a file of ``{{node:N}} slots=M`` lines, one per node, which the
    operator's takes the place of; None: it has none) and the slots it gives every node (none:
    the processes per node). A CompileError where the operator's hostfile cannot say the same:
    nodes out of order, or slots that differ from node to node."""
    t = options.topology
    for name, text in t.files.items():
        lines = [_LINE.match(line.strip()) for line in text.splitlines() if line.strip()]
        if not lines or not all(lines):
            continue
        nodes = [int(m.group(1)) for m in lines if m]
        slots = {int(m.group(2)) for m in lines if m}
        if nodes != list(range(t.nodes)) or len(slots) != 1:
            raise CompileError(f"MPIJob {options.name}: launcher {t.launcher!r}'s hostfile {name} lists nodes {nodes} "
                               f"with slots {sorted(slots)}; the operator's lists the {t.nodes} Workers in order, "
                               "each with the same slots (slotsPerWorker)")
        return name, _fits(options, slots.pop())
    return None, _fits(options, t.processes_per_node)


def _fits(options: JobOptions, slots: int) -> int:
    t = options.topology
    if t.world_size > t.nodes * slots:
        raise CompileError(f"MPIJob {options.name}: launcher {t.launcher!r} starts {t.world_size} rank(s) on "
                           f"{t.nodes} Worker(s) of {slots} slot(s) each")
    return slots


def _bind(text: str, hostfile: str | None, values: dict[str, str], options: JobOptions) -> str:
    """``text`` for the Launcher pod: the Topology's hostfile is the operator's, the rest bound
    from ``values`` (a CompileError for a placeholder the pod has no value for)."""
    if hostfile is not None:
        text = text.replace(f"{JOB_DIR}/{hostfile}", HOSTFILE)
    try:
        return bind(text, values)
    except PlaceholderError as exc:
        raise CompileError(f"MPIJob {options.name}: launcher {options.topology.launcher!r}: {exc}: the Launcher pod has the "
                           f"operator's hostfile ({HOSTFILE}), the Workers' addresses and fixed ports, no job folder "
                           "or restart count") from None
