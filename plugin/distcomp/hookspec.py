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

from .records import LauncherType

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
