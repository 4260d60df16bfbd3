"""MPIJob (kubeflow.org/v2beta1, mpi-operator 0.8), for any launcher whose ranks mpirun starts.

The Launcher pod runs ``mpirun`` once over the hostfile the operator mounts at
``/etc/mpi/hostfile`` (one ``worker-N slots=M`` line per Worker); Workers run ``sshd`` for
it, so the image needs an ssh server. Variables reach the ranks through ``-x``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...records import JobOptions
from ._pod import RUN_POLICY, container, escape, metadata, replica

if TYPE_CHECKING:
    from ...spec import ComponentSpec

HOSTFILE = "/etc/mpi/hostfile"
SSHD = ("/usr/sbin/sshd", "-De")


def mpirun(world: int, forward: list[str], hostfile: str = HOSTFILE) -> list[str]:
    argv = ["mpirun", "--allow-run-as-root", "--hostfile", hostfile, "-np", str(world), "--map-by", "slot"]
    for name in forward:
        argv += ["-x", name]
    return argv


def mpijob(spec: "ComponentSpec", options: JobOptions) -> dict[str, Any]:
    from ...core.plan import job_env

    env = job_env(spec, options.env)  # the spec's, --env, distcomp's rank defaults
    world = options.nodes * options.processes_per_node
    own = options.own
    if own is not None and own.once:  # the user's mpirun (or horovodrun): it runs once, as on Azure ML
        # an mpirun that names no hostfile (seed 003's K8s job) finds the operator's: Open MPI 4
        # through the operator's OMPI_MCA_orte_default_hostfile, Open MPI 5 (PRRTE) through this
        env = {"AZUREML_MPI_HOSTFILE": HOSTFILE, "PRTE_MCA_prte_default_hostfile": HOSTFILE,
               "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1", **env}
        launcher = container("launcher", options, escape(options.command), env)
    else:
        launcher = container("launcher", options, [*mpirun(world, sorted(env)), *escape(options.command)], env)
    worker = container("worker", options, SSHD, env)
    return {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "metadata": metadata(options, spec.name),
            # the launcher starts once every worker's sshd is up, so a failed mpirun is a real
            # failure, not a race: it fails the job as a failed rank does locally
            "spec": {"slotsPerWorker": options.processes_per_node, "mpiImplementation": "OpenMPI",
                     "launcherCreationPolicy": "WaitForWorkersReady", "runPolicy": dict(RUN_POLICY),
                     "mpiReplicaSpecs": {"Launcher": replica(1, launcher, options=options),
                                         "Worker": replica(options.nodes, worker, options=options)}}}
