"""The plugin contract: what a distcomp plugin may provide. One hook per kind of thing.

A plugin is a module (or object) with functions marked ``@hookimpl``. Third parties make it
known through an entry point in the ``distcomp`` group::

    [project.entry-points.distcomp]
    myplugin = "mypkg.plugin"

distcomp's own launchers, and the registry's directory store, register through these same
hooks (see ``distcomp.launchers``, ``distcomp.targets._builtin`` and ``distcomp.registry``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable

import pluggy

from ..base.launchernames import GROUP
from ..records import LauncherType, RegistryStoreType
from .target import TargetType

if TYPE_CHECKING:
    from .kinds import NativeMapping

PROJECT = GROUP  # the entry-point group too
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

            from distcomp.core.hookspec import hookimpl
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
    def distcomp_targets(self) -> Iterable[TargetType]:  # type: ignore[empty-body]
        """Targets: places a job is compiled for and, optionally, submitted to. A ``TargetType``
        names the target (``--target NAME``), describes it, declares its options
        (``TargetOption``: the CLI makes each one a flag of ``compile``/``submit --target NAME``,
        and ``distcomp.compile``/``submit`` take them as keywords) and has a factory that makes
        the target object, a ``distcomp.target.Target`` (see ``distcomp.core.target``): the core
        makes the job's plan once (``distcomp.core.plan.make_plan``: the spec with its overrides,
        its Topology, its warnings) and hands it over, ``compile(plan, options)`` returning a
        ``Compiled`` (pure: nothing is created anywhere); a target with ``submits=True`` also has
        ``submit(job, options, notify)`` returning a job id it understands, ``status(job_id)``
        and ``cancel(job_id)`` returning a ``JobOutcome``, and ``logs(job_id, rank, follow)``
        yielding lines. Users name a job as ``NAME:ID`` (``distcomp status NAME:ID``).

        The core owns what every job needs, so a target writes none of it: ``job`` (a
        ``distcomp.core.target.JobContext``) holds the job's plan (``job.plan.topology``: the
        replicas, each with its argv and env), what ``compile`` made of it (``job.compiled``),
        its bound input values, its masker and ``job.env``, the variables every rank must get
        to log into the job's one MLflow run, which the core created before ``submit`` and ends
        once a status, cancel or wait shows the job ended (with the masked root cause as its
        ``distcomp.failure`` tag). The core also masks the job's secrets in every outcome and log
        line it returns, and shows the plan's warnings. ``Target`` gives defaults for the
        optional ``check``, ``tracking_uri``, ``save_logs``, ``place`` and ``wait``. A factory
        that makes a plain object with ``compile(spec, options)`` (and ``submit(spec, options,
        notify, job)``) still works: the plugin manager wraps it and hands it ``plan.spec``.

        A complete plugin, ``mypkg/plugin.py``, compiling a job to a shell script::

            import shlex
            from distcomp.core.hookspec import hookimpl
            from distcomp.target import Compiled, Target, TargetOption, TargetType

            class ScriptTarget(Target):
                def compile(self, plan, options):
                    argv = plan.spec.render({}, {})
                    t = plan.topology
                    lines = ["#!/bin/sh", f"# {plan.spec.name}: {t.nodes} node(s), world size {t.world_size}",
                             f"exec {options['launcher_prefix']} {shlex.join(argv)}"]
                    return Compiled(kind="shell script", text="\\n".join(lines) + "\\n")

            @hookimpl
            def distcomp_targets():
                yield TargetType(name="script", factory=ScriptTarget, description="a shell script",
                                 options=(TargetOption("launcher_prefix", default="env",
                                                       help="what runs the command"),))

        Declared in ``pyproject.toml`` as ``[project.entry-points.distcomp] script = "mypkg.plugin"``,
        it appears in ``distcomp targets`` and ``distcomp compile --target script SPEC``
        takes ``--launcher-prefix``. The built-in targets register through this same hook.
        """

    @hookspec
    def distcomp_native_mappings(self) -> Iterable[NativeMapping]:  # type: ignore[empty-body]
        """Optional: how launchers run natively on a platform, as data (``distcomp.core.kinds``):
        ``NativeMapping(launcher, platform, kind, options)``. Every launcher runs on every target
        without one (a target runs the launcher's Topology with distcomp's node agent, one per
        node); a mapping is an optimisation, the platform's own job for the launcher. Each target
        asks the plugin manager for those of its platform (``pm.native_mapping(platform,
        launcher)``) and reads only the kind and options, so no target branches on a launcher's
        name, and a new platform needs no new hook. The ones distcomp's targets read:

        - ``kubeflow`` (``distcomp compile --target kubeflow``): ``kind`` one of the Kubeflow
          jobs distcomp builds, ``PyTorchJob``, ``MPIJob``, ``TFJob``, ``TrainJob`` (options:
          ``runtime``, the Trainer v2 runtime; a mapping with one is what ``--trainer-v2``
          picks). A kind of the plugin's own gives options ``build`` (``build(spec, options)``
          returns the manifest from the ComponentSpec and ``distcomp.records.JobOptions``),
          ``api_version``, ``plural`` and ``leader`` (the label selector of the pod whose log
          ``distcomp submit`` reports, ``{name}``: the job's name).
        - ``azureml`` (``distcomp compile --target azureml``): ``kind`` the distribution type,
          ``pytorch``, ``mpi``, ``tensorflow`` or ``ray``; the target derives
          ``process_count_per_instance`` (``worker_count``, ``parameter_server_count`` for
          ``tensorflow``) from the job's plan and sets ``resources.instance_count`` to the node
          count; options give fields of the distribution over those.

        A complete plugin, ``mypkg/plugin.py``, for the ``mine`` launcher of ``distcomp_launchers``
        whose ranks also read torchrun's ``RANK`` and ``WORLD_SIZE``: a PyTorchJob on Kubeflow
        (one pod per node, torchrun in each), and Azure ML's pytorch distribution with one process
        per instance::

            from distcomp.core.hookspec import hookimpl
            from distcomp.core.kinds import AZUREML, KUBEFLOW, NativeMapping

            @hookimpl
            def distcomp_native_mappings():
                yield NativeMapping("mine", KUBEFLOW, "PyTorchJob")
                yield NativeMapping("mine", AZUREML, "pytorch", {"process_count_per_instance": 1})

        Declared in ``pyproject.toml`` as ``[project.entry-points.distcomp] mine = "mypkg.plugin"``
        (one module may implement this hook and ``distcomp_launchers`` both). One plugin gives a
        launcher's mappings on a platform: a second provider of them is a conflict.
        """

    @hookspec
    def distcomp_registry_stores(self) -> Iterable[RegistryStoreType]:  # type: ignore[empty-body]
        """Where the component registry keeps published versions: ``RegistryStoreType(scheme,
        factory, description)``, where ``factory(location)`` returns the store of a registry
        location ``SCHEME://...`` (``--registry``, ``$DISTCOMP_REGISTRY``). A plain path is the
        built-in ``file`` store (``distcomp.registry.DirectoryStore``, registered through this
        hook too). distcomp builds, hashes and verifies every version itself; a store keeps
        folders, each put once and never changed, and one small metadata document per name:
        ``location`` (a string for messages), ``names()``, ``versions(name)`` (folder names; it is
        called on every resolve), ``stage(name, version)`` (an empty local folder to build a
        version in), ``put(name, version, folder)`` (add it atomically; False, and nothing
        replaced, when that version exists; the folder is gone afterwards), ``folder(name,
        version)`` (a local folder with the version's files, or None), ``metadata(name)`` and
        ``update_metadata(name, change)`` (store ``change(current)`` without losing a
        concurrent update). ``distcomp.registry.RegistryStore`` is this protocol.

        A complete plugin, ``mypkg/plugin.py``, keeping versions as ``ROOT/NAME@VERSION``
        folders of a ``flat:///ROOT`` registry (one metadata writer at a time)::

            import json
            import os
            import shutil
            import tempfile
            from pathlib import Path

            from distcomp.core.hookspec import hookimpl
            from distcomp.records import RegistryStoreType


            class FlatStore:
                def __init__(self, location):
                    self.location = location
                    self.root = Path(location[len("flat://"):])

                def names(self):
                    return sorted({p.name.split("@")[0] for p in self.root.glob("*@*")})

                def versions(self, name):
                    return [p.name.split("@")[1] for p in self.root.glob(f"{name}@*")]

                def stage(self, name, version):
                    self.root.mkdir(parents=True, exist_ok=True)
                    return Path(tempfile.mkdtemp(prefix=".stage-", dir=self.root))

                def put(self, name, version, folder):
                    try:  # a folder is never renamed over a folder that has files
                        os.rename(folder, self.root / f"{name}@{version}")
                        return True
                    except OSError:
                        shutil.rmtree(folder)
                        return False

                def folder(self, name, version):
                    path = self.root / f"{name}@{version}"
                    return path if path.is_dir() else None

                def metadata(self, name):
                    path = self.root / f"{name}.json"
                    return json.loads(path.read_text()) if path.exists() else {}

                def update_metadata(self, name, change):
                    data = change(self.metadata(name))
                    (self.root / f"{name}.json").write_text(json.dumps(data))
                    return data


            @hookimpl
            def distcomp_registry_stores():
                yield RegistryStoreType(scheme="flat", factory=FlatStore, description="NAME@VERSION folders")

        Declared in ``pyproject.toml`` as ``[project.entry-points.distcomp] flat = "mypkg.plugin"``,
        it serves ``distcomp registry publish SPEC --registry flat:///srv/components`` and
        ``locate("name@latest", "flat:///srv/components")``.
        """
