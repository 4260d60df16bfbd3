"""The plugin contract: what a distcomp plugin may provide. One hook per kind of thing.

A plugin is a module (or object) with functions marked ``@hookimpl``. Third parties make it
known through an entry point in the ``distcomp`` group::

    [project.entry-points.distcomp]
    myplugin = "mypkg.plugin"

distcomp's own launchers register through these same hooks (see ``distcomp.launchers``).
"""

from __future__ import annotations

from typing import Iterable

import pluggy

from .records import AzureMLDistribution, KubeflowJobType, LauncherType

PROJECT = "distcomp"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)

__all__ = ["DistcompSpecs", "PROJECT", "hookimpl", "hookspec"]


class DistcompSpecs:
    @hookspec
    def distcomp_launchers(self) -> Iterable[LauncherType]:  # type: ignore[empty-body]
        """Launcher types: a name users write in ``launcher.type``, aliases, and a factory that
        turns a ComponentSpec into a Topology (the replicas, each one's env and start argv).

        A complete plugin, ``mypkg/plugin.py``, that runs the command once per node with a
        ``MY_RANK`` variable::

            from distcomp.hookspec import hookimpl
            from distcomp.records import COMMAND, LauncherType, Replica, Topology

            def topology(spec):
                nodes = spec.distribution.nodes
                replicas = tuple(
                    Replica(role="worker", index=i, node=i, rank=i, argv=(COMMAND,),
                            env={"MY_RANK": str(i), "MY_WORLD": str(nodes)})
                    for i in range(nodes))
                return Topology(launcher="mine", nodes=nodes, processes_per_node=1,
                                world_size=nodes, replicas=replicas)

            @hookimpl
            def distcomp_launchers():
                yield LauncherType(name="mine", aliases=("my-launcher",), factory=topology,
                                   description="one process per node with MY_RANK")

        Declared in ``pyproject.toml`` as ``[project.entry-points.distcomp] mine = "mypkg.plugin"``,
        it appears in ``distcomp launchers`` and a spec may say ``launcher: {type: mine}``.
        """

    @hookspec
    def distcomp_kubeflow_jobs(self) -> Iterable[KubeflowJobType]:  # type: ignore[empty-body]
        """Optional: how a launcher runs on Kubeflow (``distcomp compile --target kubeflow``):
        ``KubeflowJobType(launcher, kind, build)``, where ``build(spec, options)`` returns the
        manifest of a ``kind`` job from the ComponentSpec and ``JobOptions`` (name, image, the
        rendered command, nodes, processes per node, env, namespace). A launcher may offer
        several kinds; ``kind="TrainJob"`` is the one ``--trainer-v2`` picks. Targets ask the
        plugin manager, never a launcher module, so a new launcher needs no target edit.

        A complete plugin, ``mypkg/plugin.py``, giving the ``mine`` launcher of
        ``distcomp_launchers`` a PyTorchJob with one pod per node::

            from distcomp.hookspec import hookimpl
            from distcomp.records import KubeflowJobType

            def pytorchjob(spec, options):
                pod = {"spec": {"containers": [{"name": "pytorch", "image": options.image,
                                                "command": list(options.command)}]}}
                workers = {"Worker": {"replicas": options.nodes - 1, "template": pod}} if options.nodes > 1 else {}
                return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
                        "metadata": {"name": options.name},
                        "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1, "template": pod}, **workers}}}

            @hookimpl
            def distcomp_kubeflow_jobs():
                yield KubeflowJobType(launcher="mine", kind="PyTorchJob", build=pytorchjob)

        Declared in ``pyproject.toml`` as ``[project.entry-points.distcomp] mine = "mypkg.plugin"``.
        """

    @hookspec
    def distcomp_azureml_distributions(self) -> Iterable[AzureMLDistribution]:  # type: ignore[empty-body]
        """Optional: how a launcher runs as an Azure ML command component (``distcomp compile
        --target azureml``): ``AzureMLDistribution(launcher, build)``, where ``build(spec)``
        returns the component's ``distribution`` mapping (``type`` is one of Azure's: ``mpi``,
        ``pytorch``, ``tensorflow``, ``ray``). The target sets ``resources.instance_count`` to
        the node count itself, so ``build`` only says how the ranks of one node start.

        A complete plugin, ``mypkg/plugin.py``, running the ``mine`` launcher of
        ``distcomp_launchers`` as one MPI process per node::

            from distcomp.hookspec import hookimpl
            from distcomp.records import AzureMLDistribution

            def distribution(spec):
                return {"type": "mpi", "process_count_per_instance": 1}

            @hookimpl
            def distcomp_azureml_distributions():
                yield AzureMLDistribution(launcher="mine", build=distribution)

        Declared in ``pyproject.toml`` as ``[project.entry-points.distcomp] mine = "mypkg.plugin"``.
        """
