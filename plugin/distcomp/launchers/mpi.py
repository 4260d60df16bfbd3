"""MPI (and Horovod): ``mpirun`` once, over a hostfile of ``host slots=N`` lines.

The ranks get Open MPI's own ``OMPI_COMM_WORLD_*`` env from mpirun; distcomp adds Azure ML's
``AZUREML_MPI_HOSTFILE``, ``AZ_BATCH_MASTER_NODE`` and ``AZ_BATCHAI_MPI_MASTER_NODE`` and forwards
them with ``-x``. When several nodes are simulated on one machine, Open MPI's ssh agent is
replaced by ``node_agent.sh`` so each node still gets its own daemon and local rank layout. On
this machine every mpirun line passes ``mpiline.rewrite`` (through ``OMPI_PRTERUN``, see
``mpishim``): Open MPI 4's single-dash options are read as Open MPI 5 spells them, and simulated
nodes never share memory, whatever btl the user names.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from ..agent.rankwatch import EXEC_AGENT
from ..base.launchernames import BUILTIN
from ..core.hookspec import hookimpl
from ..records import (COMMAND, JOB_DIR, LauncherType, RankFailure, Replica, Topology, host,
                       node_name, port)

if TYPE_CHECKING:
    from ..spec import ComponentSpec

NAME = "mpi"
HOSTFILE = "hostfile"
NODE_AGENT = Path(__file__).with_name("node_agent.sh")
# Open MPI's --output tag: "[JOBID,RANK]<stdout>: text"
RANK_PREFIX = r"^\[\d+,(?P<rank>\d+)\]<(?:stdout|stderr)>: ?"  # mpirun --output tag
_TAG = re.compile(RANK_PREFIX.encode("ascii"))
# mpirun's own reports of the rank that ended the job (its log text, whitespace folded)
_EXIT = re.compile(r"Process name: \[[^\]]*,(\d+)\]\s+Exit code:\s+(\d+)")
_SIGNAL = re.compile(r"process rank (\d+) with PID (\d+) on node (\S+) exited on\s+signal (\d+)")
_ABORT = re.compile(r'process rank (\d+) with PID (\d+) on node (\S+) calling\s+"abort"')


def openmpi_rank_line(raw: bytes) -> tuple[int, bytes] | None:
    """The rank and text of a ``--output tag`` line; None for mpirun's own lines."""
    m = _TAG.match(raw)
    return (int(m.group("rank")), raw[m.end():]) if m else None


def openmpi_failure(text: str) -> RankFailure | None:
    """The rank mpirun blames in ``text``: a non-zero exit, a signal, or an abort."""
    if m := _EXIT.search(text):
        return RankFailure(int(m.group(1)), int(m.group(2)), f"mpirun: rank {m.group(1)} exited with code {m.group(2)}")
    if s := _SIGNAL.search(text):
        return RankFailure(int(s.group(1)), -int(s.group(4)),
                           f"mpirun: rank {s.group(1)} (pid {s.group(2)}) exited on signal {s.group(4)}", int(s.group(2)))
    if a := _ABORT.search(text):
        return RankFailure(int(a.group(1)), None,
                           f"mpirun: rank {a.group(1)} (pid {a.group(2)}) called abort or exited without MPI_Finalize",
                           int(a.group(2)))
    return None


def prterun_shim() -> str | None:
    """The ``distcomp-prterun`` script of this installation (None if it was not installed)."""
    import shutil  # here: shutil (with bz2, lzma) and sysconfig cost every `distcomp run` ~3 ms, MPI or not
    import sysconfig

    for folder in (sysconfig.get_path("scripts"), str(Path(sys.executable).parent)):
        path = Path(folder) / "distcomp-prterun"
        if path.is_file() and os.access(path, os.X_OK):
            return str(path)
    found = shutil.which("distcomp-prterun")
    return str(Path(found).resolve()) if found else None


def mpi_topology(spec: "ComponentSpec") -> Topology:
    d = spec.distribution
    nodes, per_node = d.nodes, d.processes_per_node or 1
    world = nodes * per_node
    env = {
        "AZUREML_MPI_HOSTFILE": f"{JOB_DIR}/{HOSTFILE}",
        "AZ_BATCH_MASTER_NODE": f"{host(0)}:{port('master')}",
        "AZ_BATCHAI_MPI_MASTER_NODE": host(0),  # Azure's first node, as seed 004's single-node branch reads it
    }
    forward = sorted({*env, *spec.environment_variables})
    # the hostfile's slots are the job's (the plan's processes per node, seed 003's GPUs): under
    # Slurm, Open MPI 5 would take the srun step's one task per node instead ("not enough slots")
    env["PRTE_MCA_ras"] = "^slurm"
    argv = ["mpirun", "--allow-run-as-root", "--hostfile", f"{JOB_DIR}/{HOSTFILE}", "--np", str(world),
            "--map-by", "slot", "--output", "tag"]
    for name in forward:
        argv += ["-x", name]
    launcher = Replica(role="launcher", index=0, node=0, argv=(*argv, COMMAND), env=env, ranks=world,
                       output=openmpi_rank_line, failure=openmpi_failure, rank_prefix=RANK_PREFIX,
                       rank_hooks=EXEC_AGENT)  # each rank watched: the first to fail ends the job
    hostfile = "".join(f"{node_name(n)} slots={per_node}\n" for n in range(nodes))
    # NCCL's socket interface: Azure sets its GPU VMs' NIC (eth0); on one machine every simulated
    # node is reached over loopback, so "lo" is what is right here (seed 004's snippet prints it)
    local_env: dict[str, str] = {"NCCL_SOCKET_IFNAME": "lo"}
    shim = prterun_shim()
    if shim is not None:  # every mpirun line of the job, ours or the user's, passes mpiline.rewrite
        local_env["OMPI_PRTERUN"] = shim
    if nodes > 1:
        from ..core.mpiline import SHARE_HOST  # here: loading the plugins imports the launcher modules alone

        local_env.update({
            "PRTE_MCA_plm_ssh_agent": f"/bin/sh {NODE_AGENT}",
            # Simulated nodes share one host: btl/sm names its segments by host name and local
            # rank, so node0's and node1's local rank 0 would map one segment (SIGSEGV), and
            # coll/han splits by a locality that disagrees with the hostfile (MPI_Barrier hangs).
            # Between simulated nodes, talk TCP, as between real ones. A btl or coll the user
            # names replaces these: the shim (mpiline.apart) keeps sm and han out of it then.
            "OMPI_MCA_btl": "self,tcp",
            "OMPI_MCA_coll": "^han",
            SHARE_HOST: "1",
        })
    if per_node > 1 or nodes > 1:
        local_env["OMP_NUM_THREADS"] = "1"
    return Topology(launcher=NAME, nodes=nodes, processes_per_node=per_node, world_size=world,
                    replicas=(launcher,), files={HOSTFILE: hostfile}, ports=("master",), local_env=local_env)


@hookimpl
def distcomp_launchers():  # type: ignore[no-untyped-def]
    yield LauncherType(name=NAME, factory=mpi_topology, aliases=BUILTIN[NAME],
                       description="MPI via mpirun and a hostfile (Open MPI; Horovod)")


@hookimpl
def distcomp_native_mappings():  # type: ignore[no-untyped-def]
    from ..core.kinds import AZUREML, KUBEFLOW, NativeMapping

    yield NativeMapping(NAME, KUBEFLOW, "MPIJob")  # mpi-operator v2beta1: mpirun in the launcher pod
    yield NativeMapping(NAME, AZUREML, "mpi")  # Azure's own mpirun over process_count_per_instance slots
