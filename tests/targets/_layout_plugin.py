"""A launcher plugin whose Topology is not the spec's nodes x processes: whatever the spec says,
it lays the job out on 2 nodes x 3 processes (world 6). Its native mappings are the built-in
kinds (PyTorchJob, TrainJob, MPIJob, TFJob; Azure ML's pytorch, mpi and tensorflow), so a
target whose manifest follows the Topology shows 2 x 3, and one that reads the spec 1 x 1.

- ``wide``: one replica per rank (torch-style: PyTorchJob, TrainJob, Azure pytorch);
- ``wide-mpi``: one mpirun for all six ranks, over a hostfile of its own name (``hosts``, 3 slots
  a node), forwarding a variable that names node 0 and a port (MPIJob, Azure mpi);
- ``wide-tf``: 5 TensorFlow workers and 2 parameter servers (TFJob, Azure tensorflow).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from distcomp.core.hookspec import hookimpl
from distcomp.core.kinds import AZUREML, KUBEFLOW, NativeMapping
from distcomp.core.plugins import PluginManager
from distcomp.records import COMMAND, JOB_DIR, LauncherType, Replica, Topology, host, port

if TYPE_CHECKING:
    from distcomp.spec import ComponentSpec

NODES, PER_NODE, WORLD = 2, 3, 6
MPIRUN = ("mpirun", "--allow-run-as-root", "--hostfile", f"{JOB_DIR}/hosts", "--np", str(WORLD), "--map-by", "slot",
          "-x", "AZ_BATCH_MASTER_NODE", COMMAND)


def wide(spec: "ComponentSpec") -> Topology:
    replicas = tuple(Replica(role="worker", index=r, node=r // PER_NODE, rank=r) for r in range(WORLD))
    return Topology(launcher="wide", nodes=NODES, processes_per_node=PER_NODE, world_size=WORLD, replicas=replicas)


def wide_mpi(spec: "ComponentSpec") -> Topology:
    launcher = Replica(role="launcher", index=0, node=0, argv=MPIRUN, ranks=WORLD,
                       env={"AZ_BATCH_MASTER_NODE": f"{host(0)}:{port('rdv')}"})
    hosts = "".join(f"{{{{node:{n}}}}} slots={PER_NODE}\n" for n in range(NODES))
    return Topology(launcher="wide-mpi", nodes=NODES, processes_per_node=PER_NODE, world_size=WORLD,
                    replicas=(launcher,), files={"hosts": hosts}, ports=("rdv",))


def wide_tf(spec: "ComponentSpec") -> Topology:
    tasks = [("worker", i, i // PER_NODE) for i in range(5)] + [("ps", i, 0) for i in range(2)]
    replicas = tuple(Replica(role=role, index=i, node=node, rank=i if role == "worker" else None,
                             service=role == "ps") for role, i, node in tasks)
    return Topology(launcher="wide-tf", nodes=NODES, processes_per_node=PER_NODE, world_size=5, replicas=replicas)


class Wide:
    @hookimpl
    def distcomp_launchers(self) -> Any:
        yield LauncherType(name="wide", factory=wide)
        yield LauncherType(name="wide-mpi", factory=wide_mpi)
        yield LauncherType(name="wide-tf", factory=wide_tf)

    @hookimpl
    def distcomp_native_mappings(self) -> Any:
        yield NativeMapping("wide", KUBEFLOW, "PyTorchJob")
        yield NativeMapping("wide", KUBEFLOW, "TrainJob", {"runtime": "torch-distributed"})
        yield NativeMapping("wide", AZUREML, "pytorch")
        yield NativeMapping("wide-mpi", KUBEFLOW, "MPIJob")
        yield NativeMapping("wide-mpi", AZUREML, "mpi")
        yield NativeMapping("wide-tf", KUBEFLOW, "TFJob")
        yield NativeMapping("wide-tf", AZUREML, "tensorflow")


def plugins() -> PluginManager:
    """The built-in plugins and this one, registered as a plugin author's would be."""
    pm = PluginManager()
    pm.load_builtins()
    pm.register_plugin(Wide(), name="wide-plugin", provider="wide-dist 1.0")
    return pm


def spec_text(launcher: str, command: str = "python train.py") -> str:
    """A spec of one node and one process per node, run by ``launcher``."""
    return (f"name: wide\ntype: DistributedComponent\nlauncher:\n  type: {launcher}\n  process_count_per_node: 1\n"
            f"  additional_arguments: {command}\n")
