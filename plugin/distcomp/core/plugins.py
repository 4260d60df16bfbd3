"""The plugin manager: the built-ins first (launchers, the registry's directory store), then entry
points in group ``distcomp``, then checks. Loading happens on first use, never at import time."""

from __future__ import annotations

import functools
import importlib
import sys
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Callable, Hashable, Iterable, Iterator, Mapping, Sequence, TypeVar

import pluggy

from . import hookspec
from ..errors import UsageError
from ..records import KubeflowJobType, LauncherType, RegistryStoreType
from .target import Target, TargetType

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint
    from pathlib import Path

    from .kinds import NativeMapping
    from .target import Compiled, JobContext, Notify
    from ..records import JobOutcome, Plan
    from ..spec import ComponentSpec

R = TypeVar("R")

__all__ = ["BUILTIN_PLUGINS", "Conflict", "DuplicateLauncherError", "DuplicatePluginError", "Launcher",
           "PluginError", "PluginFailure", "PluginManager", "SpecTarget", "TargetPlugin", "UnknownLauncherError",
           "UnknownTargetError", "get_plugin_manager"]

BUILTIN_PLUGINS = (
    "distcomp.launchers.torch",
    "distcomp.launchers.mpi",
    "distcomp.launchers.tensorflow",
    "distcomp.launchers.deepspeed",
    "distcomp.registry._builtin",  # the registry's built-in store, scheme "file"
    "distcomp.targets._builtin",  # local, kfp, kubeflow, azureml, mlflow
)

class PluginError(UsageError):
    pass


@dataclass(frozen=True)
class Conflict:
    """One name two plugins claim: what it is and both providers."""

    what: str  # e.g. "launcher 'mpi'"
    first: str  # the provider registered first (and what it calls the thing)
    second: str

    def __str__(self) -> str:
        return f"{self.what} is provided twice: by {self.first} and by {self.second}"


class DuplicatePluginError(PluginError):
    """Every name conflict of one hook kind, reported at once (like conda's get_hook_results),
    so that a user fixes all of them in one go instead of one per run."""

    def __init__(self, conflicts: Sequence[Conflict]) -> None:
        self.conflicts = tuple(conflicts)
        text = "; ".join(map(str, self.conflicts))
        if len(self.conflicts) > 1:
            text = f"{len(self.conflicts)} conflicts: {text}"
        super().__init__(f"{text}; uninstall or disable one of them")


DuplicateLauncherError = DuplicatePluginError  # the name older callers catch: the same one type


class UnknownLauncherError(PluginError):
    pass


class UnknownTargetError(PluginError):
    pass


@dataclass(frozen=True)
class PluginFailure:
    """A plugin that could not be loaded or whose hook raised; it is skipped."""

    plugin: str
    provider: str
    error: str

    def __str__(self) -> str:
        return f"distcomp: plugin {self.plugin!r} from {self.provider} skipped: {self.error}"


@dataclass(frozen=True)
class Launcher:
    """A registered launcher type and who provides it."""

    type: LauncherType
    provider: str  # "distcomp" for the built-ins, else the distribution (or plugin) name


@dataclass(frozen=True)
class TargetPlugin:
    """A registered target type and who provides it."""

    type: TargetType
    provider: str

    def make(self) -> Target:
        """A new target object from the type's factory: a ``Target``, or another object wrapped
        once in one (``SpecTarget``: a plugin written before ``Target`` existed)."""
        made = self.type.factory()
        target = made if isinstance(made, Target) else SpecTarget(made)
        if not target.target_name:
            target.target_name = self.type.name
        return target


class SpecTarget(Target):
    """A target object that is no ``Target`` (a plugin written as the docs showed before it:
    ``compile(spec, options)``, ``submit(spec, options, notify, job)``): each method is handed the
    plan's spec; a method it lacks is ``Target``'s default."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def _own(self, name: str) -> Any:
        return getattr(self.inner, name, None)

    def compile(self, plan: "Plan", options: Mapping[str, Any]) -> "Compiled":
        return self.inner.compile(plan.spec, options)

    def submit(self, job: "JobContext", options: Mapping[str, Any], notify: "Notify") -> str:
        method = self._own("submit")
        return super().submit(job, options, notify) if method is None else method(job.plan.spec, options, notify, job)

    def status(self, job_id: str) -> "JobOutcome":
        method = self._own("status")
        return super().status(job_id) if method is None else method(job_id)

    def logs(self, job_id: str, rank: int | None, follow: bool) -> Iterator[str]:
        method = self._own("logs")
        return super().logs(job_id, rank, follow) if method is None else method(job_id, rank, follow)

    def cancel(self, job_id: str) -> "JobOutcome":
        method = self._own("cancel")
        return super().cancel(job_id) if method is None else method(job_id)

    def wait(self, job_id: str, timeout: float | None, notify: "Notify") -> "JobOutcome | None":
        method = self._own("wait")
        return super().wait(job_id, timeout, notify) if method is None else method(job_id, timeout, notify)

    def check(self, plan: "Plan", options: Mapping[str, Any], compiled: "Compiled") -> None:
        method = self._own("check")
        if method is not None:
            method(plan.spec, options, compiled)

    def tracking_uri(self, options: Mapping[str, Any], notify: "Notify") -> str | None:
        method = self._own("tracking_uri")
        return super().tracking_uri(options, notify) if method is None else method(options, notify)

    def save_logs(self, job_id: str, folder: "Path") -> None:
        method = self._own("save_logs")
        if method is None:
            super().save_logs(job_id, folder)
        else:
            method(job_id, folder)

    def place(self, job_id: str) -> str:
        method = self._own("place")
        return super().place(job_id) if method is None else str(method(job_id) or "")

    def has_gpu(self, spec: "ComponentSpec", options: Mapping[str, Any]) -> bool | None:
        method = self._own("has_gpu")
        return super().has_gpu(spec, options) if method is None else method(spec, options)


class PluginManager(pluggy.PluginManager):
    def __init__(self) -> None:
        super().__init__(hookspec.PROJECT)
        self.add_hookspecs(hookspec.DistcompSpecs)
        self.failures: list[PluginFailure] = []
        self._providers: dict[int, str] = {}
        self._launchers: Mapping[str, Launcher] | None = None
        self._targets: Mapping[str, TargetPlugin] | None = None
        self._native: tuple[tuple[NativeMapping, str], ...] | None = None

    # -- loading -------------------------------------------------------------------------
    def register_plugin(self, plugin: Any, name: str | None = None, provider: str | None = None) -> str | None:
        """Register ``plugin`` (a module or object with hookimpls), remembering its provider."""
        registered = self.register(plugin, name=name)
        if registered is not None:
            self._providers[id(plugin)] = provider or registered
            self._launchers = self._targets = self._native = None
        return registered

    def unregister(self, plugin: Any = None, name: str | None = None) -> Any:
        removed = super().unregister(plugin, name)
        self._launchers = self._targets = self._native = None  # served records must not outlive their plugin
        return removed

    def load_builtins(self) -> None:
        for module in BUILTIN_PLUGINS:
            self.register_plugin(importlib.import_module(module), name=module, provider="distcomp")

    def load_entrypoints(self, eps: "Iterable[EntryPoint] | None" = None) -> None:
        """Load every ``distcomp`` entry point; one that fails to import is reported and skipped."""
        if eps is None:
            eps = _installed_entry_points(hookspec.PROJECT)
        for ep in eps:
            dist = getattr(ep, "dist", None)
            provider = f"{dist.name} {dist.version}" if dist is not None else ep.value
            if self.is_blocked(ep.name):
                continue
            if self.has_plugin(ep.name):
                other = self._providers.get(id(self.get_plugin(ep.name)), ep.name)
                if other != provider:  # two distributions claim one plugin name: say so
                    self._fail(ep.name, provider, PluginError(f"the plugin name {ep.name!r} is already "
                                                              f"taken by {other}"))
                continue
            try:
                self.register_plugin(ep.load(), name=ep.name, provider=provider)
            except Exception as exc:  # any error in foreign code: skip it and say why
                self._fail(ep.name, provider, exc)
        self.check_hooks()

    def check_hooks(self) -> None:
        """Report and unregister every plugin implementing a hook nobody declared (a typo such as
        ``distcomp_launcher``), which pluggy would otherwise ignore without a word; then let
        pluggy's own ``check_pending`` confirm that nothing unknown is left."""
        declared = [name for name in vars(hookspec.DistcompSpecs) if name.startswith(f"{hookspec.PROJECT}_")]
        for name, caller in list(vars(self.hook).items()):
            if name.startswith("_") or caller.has_spec():
                continue
            for impl in caller.get_hookimpls():
                if impl.optionalhook or not self.is_registered(impl.plugin):
                    continue
                import difflib

                close = difflib.get_close_matches(name, declared, n=1)
                hint = f"did you mean {close[0]}?" if close else f"known hooks: {', '.join(declared)}"
                provider = self._providers.get(id(impl.plugin), impl.plugin_name)
                self._fail(impl.plugin_name, provider, PluginError(f"unknown hook {name!r} ({hint})"))
                self.unregister(impl.plugin)
        self.check_pending()

    def _fail(self, plugin: str, provider: str, exc: BaseException) -> None:
        failure = PluginFailure(plugin, provider, f"{type(exc).__name__}: {exc}")
        if failure in self.failures:  # launchers() reruns the hooks after each register
            return
        self.failures.append(failure)
        print(failure, file=sys.stderr)

    # -- serving -------------------------------------------------------------------------
    def launchers(self) -> Mapping[str, Launcher]:
        """Every launcher by canonical name. Two providers of one name (or alias) raise."""
        if self._launchers is None:
            def claims(item: LauncherType) -> Iterable[tuple[str, str, bool]]:
                return ((n, f"launcher {n!r}" if n == item.name else f"launcher alias {n!r}", n == item.name)
                        for n in item.names())
            found = self._collect("distcomp_launchers", LauncherType, claims,
                                  lambda item, provider: f"{provider} ({item.name})")
            self._launchers = MappingProxyType({item.name: Launcher(item, p) for item, p in found})
        return self._launchers

    def alias_table(self) -> Mapping[str, str]:
        """Every name and alias, lowercased -> canonical name (what the spec loaders take)."""
        return MappingProxyType({n: item.type.name for item in self.launchers().values() for n in item.type.names()})

    def _records(self, hook: str, kind: type[R], check: Callable[[R], None] | None = None) -> Iterable[tuple[R, str]]:
        """Every record a hook yields, with its provider; a plugin whose hook raises or yields
        something else (or a record ``check`` refuses) is reported and skipped whole (never half
        its records). Each plugin is
        called through pluggy's hook executor, one at a time, so
        that one plugin's error does not take the others' records with it (a plugin object need
        not be hashable, which rules out ``subset_hook_caller``)."""
        for impl in getattr(self.hook, hook).get_hookimpls():
            provider = self._providers.get(id(impl.plugin), impl.plugin_name)
            try:  # pluggy's own executor (its tracing and monitoring), on this plugin's implementation
                results: list[Any] = self._hookexec(hook, [impl], {}, False)  # type: ignore[assignment]
                items = [x for returned in results for x in (returned or ())]
                bad = [x for x in items if not isinstance(x, kind)]
                if bad:
                    raise TypeError(f"{hook} must yield {kind.__name__} records, got {type(bad[0]).__name__}")
                if check is not None:
                    for item in items:
                        check(item)
            except Exception as exc:
                self._fail(impl.plugin_name, provider, exc)
                continue
            yield from ((item, provider) for item in items)

    def _collect(self, hook: str, kind: type[R], claims: Callable[[R], Iterable[tuple[Hashable, str, bool]]],
                 label: Callable[[R, str], str] = lambda _item, provider: provider,
                 check: Callable[[R], None] | None = None) -> list[tuple[R, str]]:
        """The one collector of every hook kind: each record with its provider, in registration
        order. ``claims(record)`` gives the keys a record takes, each with how to name it and
        whether it is the record's own name (which names a conflict over an alias); every
        conflict is gathered, then raised together as one DuplicatePluginError."""
        found: list[tuple[R, str]] = []
        owner: dict[Hashable, tuple[str, bool, str]] = {}  # key -> (what, own name?, provider label)
        conflicts: list[Conflict] = []
        for item, provider in self._records(hook, kind, check):
            for key, what, primary in claims(item):
                if key in owner:
                    other_what, other_primary, other = owner[key]
                    conflicts.append(Conflict(what if primary or not other_primary else other_what,
                                              other, label(item, provider)))
                else:
                    owner[key] = (what, primary, label(item, provider))
            found.append((item, provider))
        if conflicts:
            raise DuplicatePluginError(conflicts)
        return found

    def targets(self) -> Mapping[str, TargetPlugin]:
        """Every target by name, built-ins first. Two providers of one name raise."""
        if self._targets is None:
            found = self._collect("distcomp_targets", TargetType,
                                  lambda item: [(item.name, f"target {item.name!r}", True)])
            self._targets = MappingProxyType({item.name: TargetPlugin(item, p) for item, p in found})
        return self._targets

    def target(self, name: str) -> TargetPlugin:
        """The target called ``name``; an unknown one lists the installed targets."""
        found = self.targets().get(name)
        if found is None:
            known = ", ".join(self.targets()) or "none"
            raise UnknownTargetError(f"unknown target {name!r}; known targets: {known} (see `distcomp targets`)")
        return found

    def native_mappings(self, platform: str | None = None, launcher: str | None = None) -> tuple[NativeMapping, ...]:
        """Every native mapping (``distcomp_native_mappings``), built-ins first, those of
        ``platform`` and ``launcher`` (a canonical name) when given. Raises DuplicatePluginError
        when one mapping is provided twice, or one launcher's mappings on one platform come from
        two plugins (which would otherwise leave one of them unused without a word)."""
        if self._native is None:
            from .kinds import NativeMapping, check as check_mapping  # only a target reading mappings pays for it

            found = self._collect("distcomp_native_mappings", NativeMapping,
                                  lambda m: [((m.platform, m.launcher, m.kind), str(m), True)], check=check_mapping)
            owner: dict[tuple[str, str], str] = {}
            conflicts: dict[tuple[str, str, str], Conflict] = {}
            for m, provider in found:
                first = owner.setdefault((m.platform, m.launcher), provider)
                if first != provider:
                    conflicts.setdefault((m.platform, m.launcher, provider), Conflict(
                        f"the {m.platform} mapping of launcher {m.launcher!r}", first, provider))
            if conflicts:
                raise DuplicatePluginError(list(conflicts.values()))
            self._native = tuple(found)
        return tuple(m for m, _p in self._native
                     if (platform is None or m.platform == platform) and (launcher is None or m.launcher == launcher))

    def native_mapping(self, platform: str, launcher: str) -> NativeMapping | None:
        """The first mapping of ``launcher`` (a canonical name) on ``platform``; None: the launcher
        has none there, and the target runs its Topology with distcomp's node agent."""
        return next(iter(self.native_mappings(platform, launcher)), None)

    def native_provider(self, mapping: NativeMapping) -> str:
        """Who provides ``mapping`` (for messages); "" for one no plugin gave."""
        self.native_mappings()
        return next((p for m, p in self._native or () if m is mapping), "")

    def kubeflow_jobs(self) -> Mapping[tuple[str, str], tuple[KubeflowJobType, str]]:
        """(launcher, kind) -> (the Kubeflow target's record of that ``kubeflow`` mapping, provider):
        the kinds ``distcomp submit`` knows how to create and follow."""
        from .kinds import KUBEFLOW, kubeflow_job

        self.native_mappings()
        return MappingProxyType({(m.launcher, m.kind): (kubeflow_job(m), p)
                                 for m, p in self._native or () if m.platform == KUBEFLOW})

    def registry_stores(self) -> Mapping[str, tuple[RegistryStoreType, str]]:
        """scheme -> (registry store type, provider); a second provider of one scheme raises."""
        found = self._collect("distcomp_registry_stores", RegistryStoreType, lambda item: [(
            item.scheme, f"the registry store scheme {item.scheme!r}", True)])
        return MappingProxyType({item.scheme: (item, p) for item, p in found})

    def registry_store(self, scheme: str) -> tuple[RegistryStoreType, str]:
        """The registry store of ``scheme`` (``file`` for a plain path) and its provider."""
        stores = self.registry_stores()
        if scheme not in stores:
            raise PluginError(f"unknown registry store scheme {scheme!r}; known schemes: "
                              f"{', '.join(sorted(stores)) or 'none'} (a plugin adds one through the "
                              "distcomp_registry_stores hook)")
        return stores[scheme]

    def launcher(self, name: str) -> Launcher:
        """The launcher for ``name`` or any of its aliases (any case)."""
        table = self.alias_table()
        canonical = table.get(name.strip().lower())
        if canonical is None:
            known = ", ".join(sorted(self.launchers())) or "none"
            raise UnknownLauncherError(f"unknown launcher {name!r}; known launchers: {known}"
                                       " (see `distcomp launchers`)")
        return self.launchers()[canonical]


def _installed_entry_points(group: str) -> "Iterable[EntryPoint]":
    """``importlib.metadata.entry_points(group=group)``, from distcomp's cache while no
    installed distribution changed (``_epcache``), else skipped where no distribution declares
    one: importlib.metadata (its imports and its parsing of every distribution's metadata) costs
    15-50 ms, a good part of ``distcomp run``'s own start, and most installs have no plugin."""
    from . import _epcache

    return _epcache.entry_points(group)


def _may_declare(group: str) -> bool:
    """False only when no distribution that importlib.metadata finds can have an entry point in
    ``group``: no ``[group]`` section in the entry_points.txt of any ``*.dist-info`` or
    ``*.egg-info`` on ``sys.path`` (read as importlib.metadata reads it). Whatever this does not
    look into (a zip or egg on the path, another finder of distributions) answers True, as does
    a distribution that importlib.metadata skips for an earlier one of the same name."""
    from . import _epcache

    return _epcache.other_finders() or _epcache.declaring(group) != []


@functools.cache
def get_plugin_manager() -> PluginManager:
    """The process-wide manager: built-ins, then installed plugins."""
    pm = PluginManager()
    pm.load_builtins()
    pm.load_entrypoints()
    return pm
