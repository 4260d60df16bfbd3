"""The launcher plugin system: the pluggy contract, the manager, real installed plugins found
through entry points, and the ``distcomp`` command seeing them (after conda's plugin tests)."""

from __future__ import annotations

import inspect
import json
import os
import re
import subprocess
import sys
import textwrap
import types
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import Iterator

import pytest

from distcomp.core.plan import make_plan
import distcomp.core.plugins as plugins_module
from distcomp.core.hookspec import DistcompSpecs, hookimpl
from distcomp.launchers.mpi import mpi_topology
from distcomp.core.plugins import (
    BUILTIN_PLUGINS, Conflict, DuplicateLauncherError, DuplicatePluginError, Launcher, PluginError, PluginFailure,
    PluginManager, UnknownLauncherError, get_plugin_manager,
)
from distcomp.records import COMMAND, LauncherType, Replica, Topology, host, port
from distcomp.spec import (ComponentSpec, SpecError, builtin_launchers, canonical_launcher, json_schema, load,
                           loads)
from distcomp.targets.local import prepare

from ._dists import install

BUILTINS = ("torch.distributed", "mpi", "tensorflow.distributed", "deepspeed")
KNOWN = "deepspeed, mpi, tensorflow.distributed, torch.distributed"
FAKE_MODULES = ("fakelauncher", "brokenlauncher", "dupelauncher", "factorylauncher", "typolauncher")


@pytest.fixture
def pm() -> PluginManager:
    """A fresh manager with the built-in launchers, and nothing installed."""
    manager = PluginManager()
    manager.load_builtins()
    return manager


@pytest.fixture(autouse=True)
def _forget_fake_modules() -> Iterator[None]:
    """Fake plugin packages are imported from a tmp_path: never let one leak into another test."""
    for name in FAKE_MODULES:
        sys.modules.pop(name, None)
    yield
    for name in FAKE_MODULES:
        sys.modules.pop(name, None)


def one_process_per_node(spec: ComponentSpec) -> Topology:
    nodes = spec.distribution.nodes
    return Topology(launcher="inline", nodes=nodes, processes_per_node=1, world_size=nodes,
                    ports=("coord",),
                    replicas=tuple(Replica(role="worker", index=i, node=i, rank=i, argv=("env", COMMAND),
                                           env={"COORD": f"{host(0)}:{port('coord')}", "MY_RANK": str(i)})
                                   for i in range(nodes)))


class InlinePlugin:
    """A plugin object, registered directly (what a test or an embedding application does)."""

    def __init__(self, *launchers: LauncherType) -> None:
        self.items = launchers

    @hookimpl
    def distcomp_launchers(self):  # type: ignore[no-untyped-def]
        yield from self.items


def launcher_type(name: str, *aliases: str, factory=one_process_per_node) -> LauncherType:  # type: ignore[no-untyped-def]
    return LauncherType(name=name, aliases=aliases, factory=factory, description=f"{name} for tests")


def spec_text(launcher: str, nodes: int = 1) -> str:
    return (f"name: job\ntype: DistributedComponent\nlauncher:\n  type: {launcher}\n  node_count: {nodes}\n"
            "  additional_arguments: python train.py --x 1\n")


# -- built-ins ----------------------------------------------------------------------------------

def test_builtins_are_the_four_launchers(pm: PluginManager) -> None:
    launchers = pm.launchers()
    assert tuple(launchers) == BUILTINS  # registration order
    assert all(isinstance(item, Launcher) and item.provider == "distcomp" for item in launchers.values())
    assert [item.type.name for item in launchers.values()] == list(BUILTINS)
    assert launchers["mpi"].type.factory is mpi_topology
    assert launchers["mpi"].type.aliases == ("horovod", "openmpi")
    assert launchers["deepspeed"].type.aliases == ()
    assert all(item.type.description for item in launchers.values())
    assert pm.failures == []
    assert [pm.get_name(p) for p in pm.get_plugins()] and sorted(pm.get_name(p) for p in pm.get_plugins()) == sorted(BUILTIN_PLUGINS)


def test_alias_table_is_the_spec_table(pm: PluginManager) -> None:
    assert dict(pm.alias_table()) == dict(builtin_launchers())


def test_a_manager_without_plugins_has_no_launchers() -> None:
    empty = PluginManager()
    assert dict(empty.launchers()) == {}
    with pytest.raises(UnknownLauncherError) as info:
        empty.launcher("mpi")
    assert str(info.value) == "unknown launcher 'mpi'; known launchers: none (see `distcomp launchers`)"


@pytest.mark.parametrize("name, canonical", [
    ("PyTorch", "torch.distributed"), ("pytorch", "torch.distributed"), ("TORCH", "torch.distributed"),
    (" torch.distributed ", "torch.distributed"), ("Horovod", "mpi"), ("OpenMPI", "mpi"), ("mpi", "mpi"),
    ("TF", "tensorflow.distributed"), ("tf.distributed", "tensorflow.distributed"), ("DeepSpeed", "deepspeed"),
])
def test_launcher_resolves_aliases_in_any_case(pm: PluginManager, name: str, canonical: str) -> None:
    found = pm.launcher(name)
    assert found is pm.launchers()[canonical]
    assert found.type.name == canonical and found.provider == "distcomp"


@pytest.mark.parametrize("name", ["pytorc", "", "mine", "torch distributed"])
def test_unknown_launcher_lists_the_known_ones(pm: PluginManager, name: str) -> None:
    with pytest.raises(UnknownLauncherError) as info:
        pm.launcher(name)
    assert str(info.value) == f"unknown launcher {name!r}; known launchers: {KNOWN} (see `distcomp launchers`)"
    assert isinstance(info.value, PluginError)


def test_unknown_launcher_lists_plugin_launchers_too(pm: PluginManager) -> None:
    pm.register_plugin(InlinePlugin(launcher_type("zeta")), name="z")
    with pytest.raises(UnknownLauncherError) as info:
        pm.launcher("nope")
    assert str(info.value) == ("unknown launcher 'nope'; known launchers: deepspeed, mpi, tensorflow.distributed, "
                               "torch.distributed, zeta (see `distcomp launchers`)")


def test_builtin_factories_make_topologies(pm: PluginManager, tmp_path: Path) -> None:
    for name in BUILTINS:
        spec = loads(spec_text(name, nodes=2), base_dir=tmp_path)
        topology = pm.launcher(name).type.factory(spec)
        assert isinstance(topology, Topology)
        assert (topology.launcher, topology.nodes) == (name, 2)


# -- inline plugins -----------------------------------------------------------------------------

def test_inline_plugin_object_registers_with_its_provider(pm: PluginManager) -> None:
    plugin = InlinePlugin(launcher_type("inline", "in-line", "il"))
    assert pm.register_plugin(plugin, name="my-inline", provider="acme-plugins 2.0") == "my-inline"
    launchers = pm.launchers()
    assert tuple(launchers) == (*BUILTINS, "inline")
    assert launchers["inline"].provider == "acme-plugins 2.0"
    assert launchers["inline"].type is plugin.items[0]
    table = pm.alias_table()
    assert {k: v for k, v in table.items() if v == "inline"} == {"inline": "inline", "in-line": "inline", "il": "inline"}
    assert pm.launcher("IL") is launchers["inline"]
    assert pm.launchers()["mpi"].provider == "distcomp"


def test_inline_provider_defaults_to_the_plugin_name(pm: PluginManager) -> None:
    pm.register_plugin(InlinePlugin(launcher_type("inline")), name="my-inline")
    assert pm.launchers()["inline"].provider == "my-inline"


def test_inline_module_plugin(pm: PluginManager) -> None:
    module = types.ModuleType("acme_launchers")

    @hookimpl
    def distcomp_launchers():  # type: ignore[no-untyped-def]
        return [launcher_type("acme-a"), launcher_type("acme-b", "ab")]

    module.distcomp_launchers = distcomp_launchers  # type: ignore[attr-defined]
    assert pm.register_plugin(module) == "acme_launchers"
    launchers = pm.launchers()
    assert tuple(launchers)[-2:] == ("acme-a", "acme-b")
    assert launchers["acme-a"].provider == launchers["acme-b"].provider == "acme_launchers"
    assert pm.launcher("AB").type.name == "acme-b"


def test_a_plugin_may_provide_nothing(pm: PluginManager) -> None:
    class Nothing:
        @hookimpl
        def distcomp_launchers(self):  # type: ignore[no-untyped-def]
            return None

    pm.register_plugin(Nothing(), name="nothing")
    assert tuple(pm.launchers()) == BUILTINS
    assert pm.failures == []


def test_registering_refreshes_the_launchers(pm: PluginManager) -> None:
    before = pm.launchers()
    assert pm.launchers() is before  # computed once
    plugin = InlinePlugin(launcher_type("late"))
    pm.register_plugin(plugin, name="late")
    assert "late" in pm.launchers() and "late" not in before
    pm.unregister(plugin)
    # unregistering goes through pluggy directly; the manager still serves the new set after a refresh
    pm._launchers = None
    assert "late" not in pm.launchers()


def test_blocked_plugin_is_not_registered(pm: PluginManager) -> None:
    pm.set_blocked("blocked")
    assert pm.register_plugin(InlinePlugin(launcher_type("blocked-launcher")), name="blocked") is None
    assert "blocked-launcher" not in pm.launchers()


def test_inline_factory_topology_binds_locally(pm: PluginManager, tmp_path: Path) -> None:
    pm.register_plugin(InlinePlugin(launcher_type("inline", "il")), name="inline-plugin")
    spec = loads(spec_text("IL", nodes=2), base_dir=tmp_path, launchers=pm.alias_table())
    assert spec.distribution.launcher == "inline"
    launcher = pm.launcher(spec.distribution.launcher)
    topology = launcher.type.factory(spec)
    launches = prepare(spec, topology, {}, {}, tmp_path / "job", "job-1", outer={"PATH": "/usr/bin"})
    assert [item.argv for item in launches] == [("env", "python", "train.py", "--x", "1")] * 2
    assert [item.env["MY_RANK"] for item in launches] == ["0", "1"]
    coords = {item.env["COORD"] for item in launches}
    assert len(coords) == 1
    addr, _, number = coords.pop().partition(":")
    assert addr == "127.0.0.1" and number.isdigit() and 0 < int(number) < 65536
    assert all(item.cwd == tmp_path for item in launches)


# -- duplicates ---------------------------------------------------------------------------------

def test_duplicate_name_names_both_providers(pm: PluginManager) -> None:
    pm.register_plugin(InlinePlugin(launcher_type("mpi")), name="rogue", provider="rogue-mpi 1.0")
    with pytest.raises(DuplicateLauncherError) as info:
        pm.launchers()
    assert str(info.value) == ("launcher 'mpi' is provided twice: by distcomp (mpi) and by rogue-mpi 1.0 (mpi); "
                               "uninstall or disable one of them")
    assert isinstance(info.value, PluginError)
    with pytest.raises(DuplicateLauncherError):
        pm.launcher("mpi")  # still raises: a broken set is never served


def test_duplicate_between_two_plugins(pm: PluginManager) -> None:
    pm.register_plugin(InlinePlugin(launcher_type("same")), name="a", provider="alpha 1")
    pm.register_plugin(InlinePlugin(launcher_type("same")), name="b", provider="beta 2")
    with pytest.raises(DuplicateLauncherError) as info:
        pm.launchers()
    assert str(info.value) == ("launcher 'same' is provided twice: by alpha 1 (same) and by beta 2 (same); "
                               "uninstall or disable one of them")


def test_duplicate_alias_names_both_providers(pm: PluginManager) -> None:
    pm.register_plugin(InlinePlugin(launcher_type("mytorch", "pytorch")), name="x", provider="mytorch 0.3")
    with pytest.raises(DuplicateLauncherError) as info:
        pm.launchers()
    assert str(info.value) == ("launcher alias 'pytorch' is provided twice: by distcomp (torch.distributed) and by "
                               "mytorch 0.3 (mytorch); uninstall or disable one of them")


def test_alias_equal_to_another_launchers_name(pm: PluginManager) -> None:
    pm.register_plugin(InlinePlugin(launcher_type("mympi", "mpi")), name="x", provider="mympi 1")
    with pytest.raises(DuplicateLauncherError) as info:
        pm.launchers()
    assert str(info.value) == ("launcher 'mpi' is provided twice: by distcomp (mpi) and by mympi 1 (mympi); "
                               "uninstall or disable one of them")


def test_name_equal_to_another_launchers_alias(pm: PluginManager) -> None:
    pm.register_plugin(InlinePlugin(launcher_type("horovod")), name="x", provider="hvd 1")
    with pytest.raises(DuplicateLauncherError) as info:
        pm.launchers()
    assert str(info.value) == ("launcher 'horovod' is provided twice: by distcomp (mpi) and by hvd 1 (horovod); "
                               "uninstall or disable one of them")


def test_one_plugin_yielding_the_same_name_twice(pm: PluginManager) -> None:
    pm.register_plugin(InlinePlugin(launcher_type("twice"), launcher_type("twice")), name="x", provider="x 1")
    with pytest.raises(DuplicateLauncherError) as info:
        pm.launchers()
    assert str(info.value) == ("launcher 'twice' is provided twice: by x 1 (twice) and by x 1 (twice); "
                               "uninstall or disable one of them")


def test_a_plugin_may_not_reregister_a_builtin_module(pm: PluginManager) -> None:
    import distcomp.launchers.mpi as mpi_module
    with pytest.raises(ValueError):
        pm.register_plugin(mpi_module, name="again")


# -- failing plugins ----------------------------------------------------------------------------

def test_a_failure_is_reported_once(pm: PluginManager, capsys: pytest.CaptureFixture[str]) -> None:
    class Raising:
        @hookimpl
        def distcomp_launchers(self):  # type: ignore[no-untyped-def]
            raise RuntimeError("no")

    pm.register_plugin(Raising(), name="raising")
    pm.launchers()
    pm.register_plugin(InlinePlugin(launcher_type("good")), name="good")  # reruns every hook
    assert "good" in pm.launchers()
    assert pm.failures == [PluginFailure("raising", "raising", "RuntimeError: no")]
    assert capsys.readouterr().err.count("skipped") == 1


def test_raising_hook_is_reported_and_skipped(pm: PluginManager, capsys: pytest.CaptureFixture[str]) -> None:
    class Raising:
        @hookimpl
        def distcomp_launchers(self):  # type: ignore[no-untyped-def]
            raise RuntimeError("cannot find libfoo.so")

    pm.register_plugin(Raising(), name="raising", provider="raising-plugin 0.9")
    pm.register_plugin(InlinePlugin(launcher_type("good")), name="good")
    launchers = pm.launchers()
    assert tuple(launchers) == (*BUILTINS, "good")
    assert pm.failures == [PluginFailure("raising", "raising-plugin 0.9", "RuntimeError: cannot find libfoo.so")]
    assert capsys.readouterr().err == ("distcomp: plugin 'raising' from raising-plugin 0.9 skipped: "
                                       "RuntimeError: cannot find libfoo.so\n")


def test_raising_generator_is_reported_without_partial_launchers(pm: PluginManager,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    class HalfWay:
        @hookimpl
        def distcomp_launchers(self):  # type: ignore[no-untyped-def]
            yield launcher_type("first")
            raise KeyError("second")

    pm.register_plugin(HalfWay(), name="halfway")
    assert tuple(pm.launchers()) == BUILTINS
    assert [str(f) for f in pm.failures] == ["distcomp: plugin 'halfway' from halfway skipped: KeyError: 'second'"]
    assert capsys.readouterr().err == "distcomp: plugin 'halfway' from halfway skipped: KeyError: 'second'\n"


@pytest.mark.parametrize("bad, kind", [({"name": "x"}, "dict"), ("mine", "str"), (None, "NoneType"),
                                       (Launcher(LauncherType("w", one_process_per_node), "x"), "Launcher")])
def test_non_launcher_type_is_reported_and_skipped(pm: PluginManager, capsys: pytest.CaptureFixture[str],
                                                   bad: object, kind: str) -> None:
    class Wrong:
        @hookimpl
        def distcomp_launchers(self):  # type: ignore[no-untyped-def]
            yield launcher_type("fine-but-dropped")
            yield bad

    pm.register_plugin(Wrong(), name="wrong", provider="wrong 1.0")
    pm.register_plugin(InlinePlugin(launcher_type("good")), name="good")
    assert tuple(pm.launchers()) == (*BUILTINS, "good")  # nothing from the bad plugin, not even its good record
    error = f"TypeError: distcomp_launchers must yield LauncherType records, got {kind}"
    assert pm.failures == [PluginFailure("wrong", "wrong 1.0", error)]
    assert capsys.readouterr().err == f"distcomp: plugin 'wrong' from wrong 1.0 skipped: {error}\n"


def test_non_iterable_result_is_reported(pm: PluginManager) -> None:
    class Scalar:
        @hookimpl
        def distcomp_launchers(self):  # type: ignore[no-untyped-def]
            return 42

    pm.register_plugin(Scalar(), name="scalar")
    assert tuple(pm.launchers()) == BUILTINS
    assert pm.failures == [PluginFailure("scalar", "scalar", "TypeError: 'int' object is not iterable")]


def test_bad_record_raised_inside_the_plugin_is_reported(pm: PluginManager) -> None:
    class BadName:
        @hookimpl
        def distcomp_launchers(self):  # type: ignore[no-untyped-def]
            yield LauncherType(name="Bad Name", factory=one_process_per_node)

    pm.register_plugin(BadName(), name="badname", provider="badname 1")
    assert tuple(pm.launchers()) == BUILTINS
    assert pm.failures == [PluginFailure(
        "badname", "badname 1",
        "ValueError: LauncherType name 'Bad Name': expected lowercase letters, digits, '.', '_' or '-', "
        "starting with a letter")]


def test_hookspec_validation_rejects_unknown_hook_arguments(pm: PluginManager) -> None:
    class WrongSignature:
        @hookimpl
        def distcomp_launchers(self, config):  # type: ignore[no-untyped-def]
            return []

    with pytest.raises(Exception) as info:
        pm.register_plugin(WrongSignature(), name="wrongsig")
    assert "config" in str(info.value)
    assert not pm.has_plugin("wrongsig")


# -- entry points: real installed distributions --------------------------------------------------

FAKE_PLUGIN = '''\
from distcomp.core.hookspec import hookimpl
from distcomp.records import COMMAND, LauncherType, Replica, Topology


def topology(spec):
    n = spec.distribution.nodes
    return Topology(launcher="fake", nodes=n, processes_per_node=1, world_size=n,
                    replicas=tuple(Replica(role="worker", index=i, node=i, rank=i, env={"FAKE_RANK": str(i)})
                                   for i in range(n)))


@hookimpl
def distcomp_launchers():
    yield LauncherType(name="fake", aliases=("fk",), factory=topology, description="a fake launcher")
'''


def install_fake(site: Path) -> None:
    install(site, "fakelauncher", "fakelauncher", FAKE_PLUGIN, "[distcomp]\nfake = fakelauncher\n")


def install_broken(site: Path) -> None:
    install(site, "brokenlauncher", "brokenlauncher", 'raise ImportError("brokenlauncher needs libbroken.so.1")\n',
            "[distcomp]\nbroken = brokenlauncher\n\n[console_scripts]\nbroken-tool = brokenlauncher:main\n")


def test_two_distributions_claiming_one_plugin_name(pm: PluginManager, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    install_fake(tmp_path / "a")
    install(tmp_path / "b", "otherlauncher", "otherlauncher", FAKE_PLUGIN, "[distcomp]\nfake = otherlauncher\n",
            version="2.0")
    monkeypatch.syspath_prepend(str(tmp_path / "b"))
    monkeypatch.syspath_prepend(str(tmp_path / "a"))
    pm.load_entrypoints()
    assert pm.launchers()["fake"].provider == "fakelauncher 0.1"
    assert pm.failures == [PluginFailure("fake", "otherlauncher 2.0",
                                         "PluginError: the plugin name 'fake' is already taken by fakelauncher 0.1")]


def test_entry_point_plugin_is_discovered(pm: PluginManager, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    install_fake(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    pm.load_entrypoints()
    assert pm.has_plugin("fake")
    launchers = pm.launchers()
    assert tuple(launchers) == (*BUILTINS, "fake")
    fake = launchers["fake"]
    assert fake.provider == "fakelauncher 0.1"
    assert (fake.type.aliases, fake.type.description) == (("fk",), "a fake launcher")
    assert pm.launcher("FK") is fake
    assert dict(pm.alias_table()) == {**builtin_launchers(), "fake": "fake", "fk": "fake"}
    assert pm.failures == []
    assert sys.modules["fakelauncher"].__file__ == str(tmp_path / "fakelauncher" / "__init__.py")
    # its factory works on a spec that names it by alias
    spec = loads(spec_text("fk", nodes=3), base_dir=tmp_path, launchers=pm.alias_table())
    topology = fake.type.factory(spec)
    assert [r.env["FAKE_RANK"] for r in topology.replicas] == ["0", "1", "2"]


def test_entry_points_load_once(pm: PluginManager, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    install_fake(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    pm.load_entrypoints()
    pm.load_entrypoints()
    assert tuple(pm.launchers()) == (*BUILTINS, "fake")
    assert pm.failures == []  # the second pass skips what is registered, it does not fail on it


def test_blocked_entry_point_is_skipped(pm: PluginManager, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    install_fake(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    pm.set_blocked("fake")
    pm.load_entrypoints()
    assert tuple(pm.launchers()) == BUILTINS
    assert "fakelauncher" not in sys.modules  # not even imported
    assert pm.failures == []


def test_without_the_distribution_nothing_is_loaded(pm: PluginManager) -> None:
    pm.load_entrypoints()
    assert tuple(pm.launchers()) == BUILTINS
    assert "fakelauncher" not in sys.modules


def assert_skipped(pm: PluginManager, capsys: pytest.CaptureFixture[str], plugin: str, provider: str,
                   error: str) -> None:
    """``plugin`` is the one failure, said once on stderr, and is not registered."""
    assert pm.failures == [PluginFailure(plugin, provider, error)]
    assert capsys.readouterr().err == f"distcomp: plugin {plugin!r} from {provider} skipped: {error}\n"
    assert not pm.has_plugin(plugin)


def test_broken_distribution_is_reported_and_skipped(pm: PluginManager, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    install_broken(tmp_path)
    install_fake(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    pm.load_entrypoints()
    assert_skipped(pm, capsys, "broken", "brokenlauncher 0.1", "ImportError: brokenlauncher needs libbroken.so.1")
    assert tuple(pm.launchers()) == (*BUILTINS, "fake")  # the others are still served
    assert pm.launchers()["fake"].provider == "fakelauncher 0.1"


def test_entry_point_to_a_missing_attribute_is_reported(pm: PluginManager, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    install(tmp_path, "fakelauncher", "fakelauncher", FAKE_PLUGIN, "[distcomp]\nfake = fakelauncher:nothing_here\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    pm.load_entrypoints()
    assert len(pm.failures) == 1
    failure = pm.failures[0]
    assert (failure.plugin, failure.provider) == ("fake", "fakelauncher 0.1")
    assert failure.error.startswith("AttributeError: ") and "nothing_here" in failure.error
    assert tuple(pm.launchers()) == BUILTINS


def test_installed_plugin_raising_in_its_hook(pm: PluginManager, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    source = ("from distcomp.core.hookspec import hookimpl\n\n@hookimpl\ndef distcomp_launchers():\n"
              "    raise OSError('no GPU driver')\n")
    install(tmp_path, "brokenlauncher", "brokenlauncher", source, "[distcomp]\nbroken = brokenlauncher\n", "2.5")
    monkeypatch.syspath_prepend(str(tmp_path))
    pm.load_entrypoints()
    assert pm.failures == []  # importing it worked
    assert tuple(pm.launchers()) == BUILTINS
    assert pm.failures == [PluginFailure("broken", "brokenlauncher 2.5", "OSError: no GPU driver")]
    assert capsys.readouterr().err == "distcomp: plugin 'broken' from brokenlauncher 2.5 skipped: OSError: no GPU driver\n"


def test_installed_duplicate_names_both_providers(pm: PluginManager, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    source = FAKE_PLUGIN.replace('name="fake", aliases=("fk",)', 'name="dupe", aliases=("pytorch",)')
    install(tmp_path, "dupelauncher", "dupelauncher", source, "[distcomp]\ndupe = dupelauncher\n", "3.0")
    monkeypatch.syspath_prepend(str(tmp_path))
    pm.load_entrypoints()
    with pytest.raises(DuplicateLauncherError) as info:
        pm.launchers()
    assert str(info.value) == ("launcher alias 'pytorch' is provided twice: by distcomp (torch.distributed) and by "
                               "dupelauncher 3.0 (dupe); uninstall or disable one of them")


def test_explicit_entry_points_without_a_distribution(pm: PluginManager, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    install_fake(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    pm.load_entrypoints([EntryPoint(name="fake", value="fakelauncher", group="distcomp"),
                         EntryPoint(name="gone", value="no_such_module_xyz", group="distcomp")])
    assert pm.launchers()["fake"].provider == "fakelauncher"  # no distribution: the entry point's value
    assert pm.failures == [PluginFailure("gone", "no_such_module_xyz",
                                         "ModuleNotFoundError: No module named 'no_such_module_xyz'")]


def test_get_plugin_manager_loads_builtins_and_installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    install_fake(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    get_plugin_manager.cache_clear()
    try:
        pm = get_plugin_manager()
        assert get_plugin_manager() is pm
        assert tuple(pm.launchers()) == (*BUILTINS, "fake")
        assert pm.launchers()["fake"].provider == "fakelauncher 0.1"
        assert pm.launchers()["mpi"].provider == "distcomp"
    finally:
        get_plugin_manager.cache_clear()


# -- the real command, in a subprocess ------------------------------------------------------------

def distcomp(*args: str, site: Path | None, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    if site is not None:
        env["PYTHONPATH"] = str(site)
    return subprocess.run([sys.executable, "-m", "distcomp", *args], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=60)


@pytest.fixture
def site(tmp_path: Path) -> Path:
    """A site folder with the fake plugin installed, outside the working folder."""
    path = tmp_path / "site"
    install_fake(path)
    return path


@pytest.fixture
def work(tmp_path: Path) -> Path:
    path = tmp_path / "work"
    path.mkdir()
    return path


def test_cli_launchers_shows_installed_plugin(site: Path, work: Path) -> None:
    proc = distcomp("launchers", site=site, cwd=work)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    lines = proc.stdout.splitlines()
    width = len("tensorflow.distributed")
    assert lines[0] == f"{'torch.distributed':<{width}}  provider: distcomp; aliases: pytorch, torch, pytorch.distributed"
    assert lines[-2:] == [f"{'fake':<{width}}  provider: fakelauncher 0.1; aliases: fk",
                          f"{'':<{width}}  a fake launcher"]
    assert len(lines) == 10


def test_cli_launchers_json_shows_installed_plugin(site: Path, work: Path) -> None:
    proc = distcomp("launchers", "--json", site=site, cwd=work)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert [d["name"] for d in data] == [*BUILTINS, "fake"]
    assert data[-1] == {"name": "fake", "aliases": ["fk"], "provider": "fakelauncher 0.1",
                        "description": "a fake launcher"}
    assert {d["provider"] for d in data[:-1]} == {"distcomp"}


def test_cli_launchers_without_plugin(work: Path) -> None:
    proc = distcomp("launchers", "--json", site=None, cwd=work)
    assert proc.returncode == 0, proc.stderr
    assert [d["name"] for d in json.loads(proc.stdout)] == list(BUILTINS)


def test_cli_launchers_reports_broken_plugin(tmp_path: Path, site: Path, work: Path) -> None:
    install_broken(site)
    proc = distcomp("launchers", "--json", site=site, cwd=work)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ("distcomp: plugin 'broken' from brokenlauncher 0.1 skipped: "
                           "ImportError: brokenlauncher needs libbroken.so.1\n")
    assert [d["name"] for d in json.loads(proc.stdout)] == [*BUILTINS, "fake"]


def test_cli_launchers_duplicate_is_a_usage_error(tmp_path: Path, work: Path) -> None:
    site = tmp_path / "site"
    source = FAKE_PLUGIN.replace('name="fake", aliases=("fk",)', 'name="mpi"')
    install(site, "dupelauncher", "dupelauncher", source, "[distcomp]\ndupe = dupelauncher\n", "3.0")
    proc = distcomp("launchers", site=site, cwd=work)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr == ("distcomp launchers: launcher 'mpi' is provided twice: by distcomp (mpi) and by "
                           "dupelauncher 3.0 (mpi); uninstall or disable one of them\n")


def test_cli_validate_accepts_a_plugin_launcher_only_when_installed(site: Path, work: Path) -> None:
    spec = work / "component.yaml"
    spec.write_text("name: faked\ntype: DistributedComponent\nlauncher: {type: fk, node_count: 2,"
                    " additional_arguments: python train.py}\n", encoding="utf-8")
    without = distcomp("validate", str(spec), site=None, cwd=work)
    assert without.returncode == 2
    assert without.stdout == ""
    assert without.stderr.splitlines() == [
        f"{spec}:3:18: launcher.type: unknown launcher 'fk' (expected one of: deepspeed, mpi, tensorflow.distributed, "
        "torch.distributed (aliases: horovod, openmpi, pytorch, pytorch.distributed, tensorflow, tf, tf.distributed, "
        "torch))",
        f"{spec}: invalid (1 error)"]

    installed = distcomp("validate", str(spec), site=site, cwd=work)
    assert installed.stderr == ""
    assert installed.stdout == f"{spec}: ok: faked (fake, 2 nodes x 1 process)\n"
    assert installed.returncode == 0


def test_cli_render_accepts_a_plugin_launcher(site: Path, work: Path) -> None:
    spec = work / "component.yaml"
    spec.write_text("name: faked\ntype: DistributedComponent\nlauncher: {type: FK,"
                    " additional_arguments: python train.py --n 3}\n", encoding="utf-8")
    proc = distcomp("render", "--json", str(spec), site=site, cwd=work)
    assert proc.stderr == ""
    assert json.loads(proc.stdout) == ["python", "train.py", "--n", "3"]
    assert proc.returncode == 0
    without = distcomp("render", str(spec), site=None, cwd=work)
    assert without.returncode == 2
    assert "launcher.type: unknown launcher 'FK'" in without.stderr


# -- the contract's documentation ----------------------------------------------------------------

def hook_names() -> list[str]:
    return [name for name, fn in inspect.getmembers(DistcompSpecs, inspect.isfunction)
            if hasattr(fn, "distcomp_spec")]


def example_code(doc: str) -> str:
    """The first literal block (after a line ending in ``::``) of a docstring."""
    lines = inspect.cleandoc(doc).splitlines()
    start = next(i for i, line in enumerate(lines) if line.rstrip().endswith("::")) + 1
    block: list[str] = []
    for line in lines[start:]:
        if line.strip() and not line.startswith(" "):
            break
        block.append(line)
    return textwrap.dedent("\n".join(block)).strip() + "\n"


def example_module(hook: str) -> types.ModuleType:
    module = types.ModuleType(f"example_{hook}")
    exec(compile(example_code(getattr(DistcompSpecs, hook).__doc__), f"<{hook} docstring>", "exec"), module.__dict__)
    return module


def test_the_contract_has_the_launchers_and_the_target_hooks() -> None:
    assert hook_names() == ["distcomp_launchers", "distcomp_native_mappings", "distcomp_registry_stores",
                            "distcomp_targets"]
    assert set(hook_names()) == {h for h in dir(PluginManager().hook) if h.startswith("distcomp_")}


@pytest.mark.parametrize("hook", hook_names())
def test_every_hook_documents_a_complete_plugin(hook: str) -> None:
    doc = getattr(DistcompSpecs, hook).__doc__
    assert doc
    code = example_code(doc)
    assert "from distcomp.core.hookspec import hookimpl" in code
    assert f"@hookimpl\ndef {hook}(" in code
    assert "[project.entry-points.distcomp]" in doc
    module = example_module(hook)
    fresh = PluginManager()
    fresh.register_plugin(module, name="example", provider="mypkg 1.0")
    assert [impl.plugin for impl in getattr(fresh.hook, hook).get_hookimpls()] == [module]


def test_launchers_docstring_example_works(tmp_path: Path) -> None:
    module = example_module("distcomp_launchers")
    fresh = PluginManager()
    fresh.register_plugin(module, name="mine-plugin", provider="mypkg 1.0")
    assert tuple(fresh.launchers()) == ("mine",)
    mine = fresh.launcher("My-Launcher")
    assert (mine.provider, mine.type.name, mine.type.aliases) == ("mypkg 1.0", "mine", ("my-launcher",))
    assert fresh.failures == []

    fresh.load_builtins()  # alongside the built-ins, as installed
    spec = loads(spec_text("my-launcher", nodes=3), base_dir=tmp_path, launchers=fresh.alias_table())
    assert spec.distribution.launcher == "mine"
    topology = mine.type.factory(spec)
    assert (topology.launcher, topology.nodes, topology.processes_per_node, topology.world_size) == ("mine", 3, 1, 3)
    assert [(r.role, r.index, r.node, r.rank, r.argv) for r in topology.replicas] == [
        ("worker", i, i, i, (COMMAND,)) for i in range(3)]
    assert [dict(r.env) for r in topology.replicas] == [{"MY_RANK": str(i), "MY_WORLD": "3"} for i in range(3)]
    launches = prepare(spec, topology, {}, {}, tmp_path / "job", "j1", outer={})
    assert [item.argv for item in launches] == [("python", "train.py", "--x", "1")] * 3
    assert [item.env["MY_RANK"] for item in launches] == ["0", "1", "2"]

    # the plan gives its ranks distcomp's rank contract (MY_RANK means nothing to distcomp.runtime);
    # a launcher with a contract of its own gets none
    from distcomp.core.plan import RANK_ENV, make_plan

    planned = make_plan(spec, pm=fresh).topology
    assert [{k: r.env[k] for k in RANK_ENV} for r in planned.replicas] == [
        {"DISTCOMP_RANK": str(i), "DISTCOMP_WORLD_SIZE": "3", "DISTCOMP_LOCAL_RANK": "0",
         "DISTCOMP_LOCAL_WORLD_SIZE": "1", "DISTCOMP_NODE_RANK": str(i)} for i in range(3)]
    assert [r.env["MY_RANK"] for r in planned.replicas] == ["0", "1", "2"]
    torch = make_plan(loads(spec_text("torch.distributed", nodes=2), base_dir=tmp_path,
                            launchers=fresh.alias_table()), nproc_per_node=2, pm=fresh).topology
    assert not any(k in r.env for r in torch.replicas for k in RANK_ENV)


def test_registry_stores_docstring_example_works(tmp_path: Path) -> None:
    from distcomp.registry import RegistryError, open_registry

    fresh = PluginManager()
    fresh.load_builtins()
    fresh.register_plugin(example_module("distcomp_registry_stores"), name="flat-plugin", provider="mypkg 1.0")
    assert {scheme: provider for scheme, (_t, provider) in fresh.registry_stores().items()} == {
        "file": "distcomp", "flat": "mypkg 1.0"}
    source = tmp_path / "src"
    source.mkdir()
    (source / "train.py").write_text("print('hi')\n")
    for version in ("1.0.0", "1.1.0"):
        (source / "component.yaml").write_text(spec_text("mpi").replace("name: job", f"name: job\nversion: {version}"))
        assert open_registry(f"flat://{tmp_path / 'flat'}", pm=fresh).publish(source).created
    registry = open_registry(f"flat://{tmp_path / 'flat'}", pm=fresh)
    assert sorted(p.name for p in (tmp_path / "flat").iterdir()) == ["job@1.0.0", "job@1.1.0"]
    assert registry.names() == ["job"]
    assert registry.resolve("job@latest").spec_path == tmp_path / "flat" / "job@1.1.0" / "component.yaml"
    registry.deprecate("job@1.1.0", "use 1.0.0")
    assert json.loads((tmp_path / "flat" / "job.json").read_text())["deprecated"]["1.1.0"]["message"] == "use 1.0.0"
    assert registry.resolve("job@^1").version == "1.0.0"
    (source / "train.py").write_text("print('changed')\n")
    with pytest.raises(RegistryError, match="job@1.1.0 is already published with different content"):
        registry.publish(source)
    assert [p.name for p in (tmp_path / "flat").iterdir() if p.name.startswith(".stage-")] == []
    (tmp_path / "flat" / "job@1.0.0" / "train.py").chmod(0o644)
    (tmp_path / "flat" / "job@1.0.0" / "train.py").write_text("tampered")
    with pytest.raises(RegistryError, match="does not match its content hash: train.py changed"):
        registry.resolve("job@1.0.0")


def test_plugin_launcher_is_unknown_to_specs_without_the_plugin(tmp_path: Path, pm: PluginManager) -> None:
    with pytest.raises(SpecError) as info:
        loads(spec_text("my-launcher"), base_dir=tmp_path, launchers=pm.alias_table())
    assert "unknown launcher 'my-launcher'" in str(info.value)


# -- loading is lazy ------------------------------------------------------------------------------

def test_importing_does_not_load_plugins() -> None:
    code = textwrap.dedent("""\
        import json, sys
        import distcomp.cli, distcomp.core.plugins, distcomp.core.hookspec, distcomp.records
        before = sorted(m for m in sys.modules if m.startswith(("distcomp.launchers", "distcomp.registry")))
        cached = distcomp.core.plugins.get_plugin_manager.cache_info().currsize
        distcomp.core.plugins.get_plugin_manager()
        after = sorted(m for m in sys.modules if m.startswith("distcomp.launchers"))
        print(json.dumps([before, cached, after]))
        """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    before, cached, after = json.loads(proc.stdout)
    assert before == []
    assert cached == 0
    assert after == ["distcomp.launchers", *sorted(p for p in BUILTIN_PLUGINS if p.startswith("distcomp.launchers"))]


def test_no_plugin_installed_costs_no_importlib_metadata() -> None:
    """Where no distribution declares a ``distcomp`` entry point, the manager loads without
    importlib.metadata (a good part of `distcomp run`'s own start), and has the built-ins."""
    code = ("import json, sys\nfrom distcomp.core.plugins import get_plugin_manager\n"
            "names = list(get_plugin_manager().launchers())\n"
            "print(json.dumps([names, 'importlib.metadata' in sys.modules]))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == [list(BUILTINS), False]


@pytest.mark.parametrize("text, declares", [
    ("[console_scripts]\ndistcomp = distcomp.cli:main\n", False),  # distcomp's own: a script, not a plugin
    ("[distcomp.other]\nx = y\n# [distcomp]\n", False),
    ("[console_scripts]\nx = y\n\n  [distcomp]  \nfake = fakelauncher\n", True),  # importlib strips the line
    ("[[distcomp]]\nfake = fakelauncher\n", True),  # ... and the brackets
])
def test_the_cheap_look_finds_what_importlib_metadata_finds(tmp_path: Path, text: str, declares: bool) -> None:
    install(tmp_path, "fakelauncher", "fakelauncher", FAKE_PLUGIN, text)
    code = ("import json; from importlib.metadata import entry_points; from distcomp.core.plugins import _may_declare; "
            "print(json.dumps([bool(entry_points(group='distcomp')), _may_declare('distcomp')]))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(tmp_path)})  # a fresh sys.path: this dist and the venv
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == [declares, declares]  # importlib.metadata's answer, then the look's


def test_the_cheap_look_leaves_what_it_cannot_read_to_importlib_metadata(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "plugins.zip").write_bytes(b"PK\x05\x06" + bytes(18))  # an (empty) zip on the path
    monkeypatch.syspath_prepend(str(tmp_path / "plugins.zip"))
    assert plugins_module._may_declare("distcomp") is True


def test_the_process_wide_manager_is_cached() -> None:
    assert isinstance(plugins_module.get_plugin_manager.cache_info().currsize, int)
    assert get_plugin_manager() is get_plugin_manager()


# -- the optional native mappings hook ------------------------------------------------------------

def test_builtin_native_mappings(pm: PluginManager) -> None:
    from distcomp.core.kinds import AZUREML, KUBEFLOW
    from distcomp.targets.kubeflow._compile import job_type

    assert {(m.platform, m.launcher, m.kind, tuple(m.options.items())) for m in pm.native_mappings()} == {
        (KUBEFLOW, "torch.distributed", "PyTorchJob", ()),
        (KUBEFLOW, "torch.distributed", "TrainJob", (("runtime", "torch-distributed"),)),
        (KUBEFLOW, "deepspeed", "PyTorchJob", ()),
        (KUBEFLOW, "deepspeed", "TrainJob", (("runtime", "deepspeed-distributed"),)),
        (KUBEFLOW, "mpi", "MPIJob", ()), (KUBEFLOW, "tensorflow.distributed", "TFJob", ()),
        (AZUREML, "torch.distributed", "pytorch", ()), (AZUREML, "deepspeed", "pytorch", ()),
        (AZUREML, "mpi", "mpi", ()), (AZUREML, "tensorflow.distributed", "tensorflow", ())}
    assert {pm.native_provider(m) for m in pm.native_mappings()} == {"distcomp"}
    assert [m.kind for m in pm.native_mappings(AZUREML, "mpi")] == ["mpi"]
    assert pm.native_mapping(AZUREML, "torch.distributed").kind == "pytorch"  # type: ignore[union-attr]
    assert pm.native_mapping("ray", "torch.distributed") is None  # a platform no launcher maps: no hook needed
    assert {key: provider for key, (_t, provider) in pm.kubeflow_jobs().items()} == {
        ("torch.distributed", "PyTorchJob"): "distcomp", ("torch.distributed", "TrainJob"): "distcomp",
        ("deepspeed", "PyTorchJob"): "distcomp", ("deepspeed", "TrainJob"): "distcomp",
        ("mpi", "MPIJob"): "distcomp", ("tensorflow.distributed", "TFJob"): "distcomp"}
    pytorchjob = job_type(pm, "torch.distributed")
    assert (pytorchjob.kind, pytorchjob.api_version, pytorchjob.plural, pytorchjob.build) == (
        "PyTorchJob", "kubeflow.org/v1", "pytorchjobs", None)  # data: the Kubeflow target builds the kind
    trainjob = job_type(pm, "torch.distributed", trainer_v2=True)
    assert (trainjob.kind, trainjob.runtime, trainjob.plural) == ("TrainJob", "torch-distributed", "trainjobs")


def test_a_plugin_launcher_brings_its_own_kubeflow_job(pm: PluginManager) -> None:
    """A new launcher supports the Kubeflow target with a kind of its own, without any edit to the target."""
    from distcomp.core.kinds import KUBEFLOW, NativeMapping
    from distcomp.records import JobOptions
    from distcomp.targets.kubeflow import compile_job

    def build(spec: ComponentSpec, options: JobOptions) -> dict[str, object]:
        return {"apiVersion": "example.org/v1", "kind": "SoloJob", "metadata": {"name": options.name},
                "spec": {"pods": options.nodes, "command": list(options.command)}}

    class Plugin:
        @hookimpl
        def distcomp_launchers(self):  # type: ignore[no-untyped-def]
            yield LauncherType(name="solo", factory=mpi_topology)

        @hookimpl
        def distcomp_native_mappings(self):  # type: ignore[no-untyped-def]
            yield NativeMapping("solo", KUBEFLOW, "SoloJob", {"build": build})

    pm.register_plugin(Plugin(), name="solo-plugin", provider="solo-dist 1.0")
    spec = loads("name: s\ntype: DistributedComponent\nlauncher:\n  type: solo\n  process_count_per_node: 1\n"
                 "  additional_arguments: python run.py\n", launchers=pm.alias_table())
    manifest = compile_job(make_plan(spec.with_overrides(nodes=3), gpu=False, pm=pm), {}, {}, pm=pm, image="i:1")
    assert manifest == {"apiVersion": "example.org/v1", "kind": "SoloJob", "metadata": {"name": "s"},
                        "spec": {"pods": 3, "command": ["python", "run.py"]}}
    assert pm.native_provider(pm.native_mappings(KUBEFLOW, "solo")[0]) == "solo-dist 1.0"

    class Again:
        @hookimpl
        def distcomp_native_mappings(self):  # type: ignore[no-untyped-def]
            yield NativeMapping("solo", KUBEFLOW, "SoloJob", {"build": build})

    pm.register_plugin(Again(), name="again", provider="other-dist 2.0")
    with pytest.raises(DuplicateLauncherError, match="solo-dist 1.0 and by other-dist 2.0"):
        pm.kubeflow_jobs()


def test_a_second_plugin_mapping_a_launcher_on_one_platform_is_a_conflict(pm: PluginManager) -> None:
    """Another kind for a launcher that already has mappings there would never be taken: said, not ignored.
    On another platform it is welcome (a new target's plugin mapping the built-in launchers)."""
    from distcomp.core.kinds import AZUREML, NativeMapping

    class Other:
        @hookimpl
        def distcomp_native_mappings(self):  # type: ignore[no-untyped-def]
            yield NativeMapping("mpi", AZUREML, "pytorch")
            yield NativeMapping("mpi", "ray", "RayJob", {"workers": 2})

    pm.register_plugin(Other(), name="other", provider="other 1.0")
    with pytest.raises(DuplicatePluginError) as info:
        pm.native_mappings()
    assert str(info.value) == ("the azureml mapping of launcher 'mpi' is provided twice: by distcomp and by other 1.0; "
                               "uninstall or disable one of them")
    pm.unregister(name="other")

    class Ray:
        @hookimpl
        def distcomp_native_mappings(self):  # type: ignore[no-untyped-def]
            yield NativeMapping("mpi", "ray", "RayJob", {"workers": 2})

    pm.register_plugin(Ray(), name="ray", provider="ray-plugin 1.0")
    ray = pm.native_mapping("ray", "mpi")
    assert ray is not None and (ray.kind, dict(ray.options), pm.native_provider(ray)) == (
        "RayJob", {"workers": 2}, "ray-plugin 1.0")


@pytest.mark.parametrize(("mapping", "message"), [
    ({"launcher": "", "platform": "kubeflow", "kind": "PyTorchJob"}, "launcher must be a non-empty string"),
    ({"launcher": "x", "platform": "Kube Flow", "kind": "PyTorchJob"}, "platform 'Kube Flow' must be a lowercase name"),
    ({"launcher": "x", "platform": "kubeflow", "kind": "PyTorchJob", "options": ["runtime"]},
     "options must be a mapping with string keys"),
])
def test_a_malformed_mapping_is_refused_where_it_is_made(mapping: dict, message: str) -> None:  # type: ignore[type-arg]
    from distcomp.core.kinds import NativeMapping

    with pytest.raises(ValueError, match=re.escape(message)):
        NativeMapping(**mapping)


@pytest.mark.parametrize(("kind", "options", "message"), [
    ("PyTorchJob", {"replicas": 2}, "the kubeflow PyTorchJob mapping of launcher 'odd': unknown option(s) replicas"),
    ("SoloJob", {"api_version": "v1"}, "api_version 'v1' must be GROUP/VERSION"),
    ("pytorchjob", {}, "kind must be a Kubernetes kind"),
])
def test_a_kubeflow_mapping_the_target_cannot_read_skips_its_plugin(pm: PluginManager, kind: str,
                                                                      options: dict, message: str) -> None:  # type: ignore[type-arg]
    from distcomp.core.kinds import KUBEFLOW, NativeMapping

    class Odd:
        @hookimpl
        def distcomp_launchers(self):  # type: ignore[no-untyped-def]
            yield LauncherType(name="odd", factory=mpi_topology)

        @hookimpl
        def distcomp_native_mappings(self):  # type: ignore[no-untyped-def]
            yield NativeMapping("odd", "azureml", "mpi")
            yield NativeMapping("odd", KUBEFLOW, kind, options)

    pm.register_plugin(Odd(), name="odd", provider="odd 1.0")
    assert pm.native_mappings(launcher="odd") == ()  # the whole plugin's mappings, never half of them
    (failure,) = pm.failures
    assert (failure.plugin, failure.provider) == ("odd", "odd 1.0") and message in failure.error


def test_trainer_v2_picks_the_job_that_names_a_runtime_whatever_its_kind(pm: PluginManager) -> None:
    """A plugin's Trainer-style job (its own kind, with a runtime) is what --trainer-v2 takes; its
    classic job is the default."""
    from distcomp.core.kinds import KUBEFLOW, NativeMapping
    from distcomp.records import JobOptions
    from distcomp.targets.kubeflow import CompileError
    from distcomp.targets.kubeflow._compile import job_type

    def build(spec: ComponentSpec, options: JobOptions) -> dict[str, object]:
        return {}

    class Plugin:
        @hookimpl
        def distcomp_launchers(self):  # type: ignore[no-untyped-def]
            yield LauncherType(name="duo", factory=mpi_topology)

        @hookimpl
        def distcomp_native_mappings(self):  # type: ignore[no-untyped-def]
            yield NativeMapping("duo", KUBEFLOW, "DuoTrainJob", {"build": build, "runtime": "duo-runtime"})
            yield NativeMapping("duo", KUBEFLOW, "DuoJob", {"build": build})

    pm.register_plugin(Plugin(), name="duo-plugin", provider="duo-dist 1.0")
    assert job_type(pm, "duo", trainer_v2=True).kind == "DuoTrainJob"
    assert job_type(pm, "duo").kind == "DuoJob"
    with pytest.raises(CompileError, match=re.escape("launcher 'mpi' has no Kubeflow Trainer v2 TrainJob (it has: "
                                                     "MPIJob); drop --trainer-v2")):
        job_type(pm, "mpi", trainer_v2=True)


def test_a_launcher_without_a_kubeflow_mapping_gets_the_node_agent_job(pm: PluginManager) -> None:
    from distcomp.core.kinds import KUBEFLOW
    from distcomp.targets.kubeflow._agentjob import agentjob
    from distcomp.targets.kubeflow._compile import job_type

    class Plugin:
        @hookimpl
        def distcomp_launchers(self):  # type: ignore[no-untyped-def]
            yield LauncherType(name="plain", factory=mpi_topology)

    pm.register_plugin(Plugin(), name="plain-plugin")
    assert pm.native_mapping(KUBEFLOW, "plain") is None
    job = job_type(pm, "plain")
    assert (job.kind, job.build) == ("PyTorchJob", agentjob)


def test_native_mappings_docstring_example_makes_a_valid_pytorchjob(tmp_path: Path) -> None:
    from distcomp.targets.kubeflow import compile_job
    from tests.targets.kubeflow.test_manifests import validator

    fresh = PluginManager()
    fresh.register_plugin(example_module("distcomp_launchers"), name="mine-plugin", provider="mypkg 1.0")
    fresh.register_plugin(example_module("distcomp_native_mappings"), name="mine-native", provider="mypkg 1.0")
    spec = loads(spec_text("mine", nodes=3), base_dir=tmp_path, launchers=fresh.alias_table())
    manifest = compile_job(make_plan(spec, gpu=False, pm=fresh), {}, {}, pm=fresh, image="i:1")
    validator("kubeflow.org/v1", "PyTorchJob").validate(manifest)  # the CRD's schema, parsed once a worker
    assert manifest["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == 2
    command = manifest["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["command"]
    assert command[0] == "torchrun"  # the native job: torchrun in each pod, not distcomp's node agent


def test_a_pre_release_hook_is_an_unknown_hook_like_any_other(pm: PluginManager) -> None:
    """The per-platform hooks replaced before any release have no message of their own (issue 35)."""
    class Old:
        @hookimpl
        def distcomp_kubeflow_jobs(self):  # type: ignore[no-untyped-def]
            return []

    old = Old()
    pm.register_plugin(old, name="old", provider="old 0.9")
    pm.check_hooks()
    (failure,) = pm.failures
    assert failure.error == ("PluginError: unknown hook 'distcomp_kubeflow_jobs' (known hooks: distcomp_launchers, "
                             "distcomp_targets, distcomp_native_mappings, distcomp_registry_stores)")
    assert not pm.is_registered(old)


# -- a misspelled hook, every conflict at once ----------------------------------------------------

TYPO_PLUGIN = FAKE_PLUGIN.replace("def distcomp_launchers():", "def distcomp_launcher():")


def test_a_misspelled_hook_is_reported_with_its_provider(pm: PluginManager, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    install(tmp_path, "typolauncher", "fakelauncher", TYPO_PLUGIN, "[distcomp]\ntypo = fakelauncher\n", "1.2")
    monkeypatch.syspath_prepend(str(tmp_path))
    pm.load_entrypoints()
    assert_skipped(pm, capsys, "typo", "typolauncher 1.2",
                   "PluginError: unknown hook 'distcomp_launcher' (did you mean distcomp_launchers?)")
    assert tuple(pm.launchers()) == BUILTINS
    pm.check_pending()  # pluggy itself finds nothing unknown left


def test_an_unknown_hook_far_from_any_lists_the_known_ones(pm: PluginManager) -> None:
    class Odd:
        @hookimpl
        def zzz_something(self):  # type: ignore[no-untyped-def]
            return []

    pm.register_plugin(Odd(), name="odd", provider="odd 1")
    pm.check_hooks()
    assert len(pm.failures) == 1
    assert pm.failures[0].error.startswith("PluginError: unknown hook 'zzz_something' (known hooks: "
                                           "distcomp_launchers, distcomp_targets, distcomp_native_mappings")


def test_cli_reports_a_misspelled_hook_and_goes_on(tmp_path: Path, site: Path, work: Path) -> None:
    install(site, "typolauncher", "typolauncher", TYPO_PLUGIN, "[distcomp]\ntypo = typolauncher\n", "1.2")
    proc = distcomp("launchers", "--json", site=site, cwd=work)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ("distcomp: plugin 'typo' from typolauncher 1.2 skipped: PluginError: unknown hook "
                           "'distcomp_launcher' (did you mean distcomp_launchers?)\n")
    assert [d["name"] for d in json.loads(proc.stdout)] == [*BUILTINS, "fake"]


def test_every_conflict_is_reported_at_once(pm: PluginManager) -> None:
    pm.register_plugin(InlinePlugin(launcher_type("mpi"), launcher_type("mine", "pytorch"), launcher_type("solo")),
                       name="rogue", provider="rogue 1.0")
    pm.register_plugin(InlinePlugin(launcher_type("solo")), name="other", provider="other 2.0")
    with pytest.raises(DuplicatePluginError) as info:
        pm.launchers()
    assert [str(c) for c in info.value.conflicts] == [
        "launcher 'mpi' is provided twice: by distcomp (mpi) and by rogue 1.0 (mpi)",
        "launcher alias 'pytorch' is provided twice: by distcomp (torch.distributed) and by rogue 1.0 (mine)",
        "launcher 'solo' is provided twice: by rogue 1.0 (solo) and by other 2.0 (solo)"]
    assert str(info.value) == ("3 conflicts: " + "; ".join(str(c) for c in info.value.conflicts)
                               + "; uninstall or disable one of them")
    assert info.value.conflicts[0] == Conflict("launcher 'mpi'", "distcomp (mpi)", "rogue 1.0 (mpi)")


def test_every_hook_kind_raises_the_one_duplicate_error(pm: PluginManager) -> None:
    builtin_native = pm.native_mappings("kubeflow", "torch.distributed")[0]
    builtin_store = pm.registry_store("file")[0]

    class Copycat:
        @hookimpl
        def distcomp_native_mappings(self):  # type: ignore[no-untyped-def]
            yield builtin_native

        @hookimpl
        def distcomp_registry_stores(self):  # type: ignore[no-untyped-def]
            yield builtin_store

    pm.register_plugin(Copycat(), name="copycat", provider="copycat 0.1")
    expected = {
        pm.native_mappings: "the kubeflow PyTorchJob mapping of launcher 'torch.distributed' is provided twice",
        pm.registry_stores: "the registry store scheme 'file' is provided twice"}
    for collect, what in expected.items():
        with pytest.raises(DuplicatePluginError) as info:
            collect()
        assert str(info.value) == f"{what}: by distcomp and by copycat 0.1; uninstall or disable one of them"
    assert DuplicateLauncherError is DuplicatePluginError


def test_the_collector_keeps_each_records_provider(pm: PluginManager, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    install_fake(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    pm.load_entrypoints()
    providers = {name: item.provider for name, item in pm.launchers().items()}
    assert providers == {**{name: "distcomp" for name in BUILTINS}, "fake": "fakelauncher 0.1"}
    assert {pm.native_provider(m) for m in pm.native_mappings("azureml")} == {"distcomp"}


# -- the spec layer asks the manager ---------------------------------------------------------------

def launcher_accepted(schema: dict, name: str) -> bool:  # type: ignore[type-arg]
    """Whether a JSON Schema of the DistributedComponent dialect accepts ``launcher.type: name``."""
    return re.fullmatch(schema["properties"]["launcher"]["properties"]["type"]["pattern"], name) is not None


@pytest.fixture
def inline_in_process() -> Iterator[PluginManager]:
    """The process-wide manager with an inline launcher plugin, removed again afterwards."""
    manager = get_plugin_manager()
    plugin = InlinePlugin(launcher_type("inline", "my-inline"))
    manager.register_plugin(plugin, name="inline-test", provider="inline 0.1")
    yield manager
    manager.unregister(plugin)
    assert "inline" not in manager.launchers()


def test_spec_load_without_a_table_sees_plugin_launchers(inline_in_process: PluginManager, tmp_path: Path) -> None:
    spec = loads(spec_text("My-Inline", nodes=2), base_dir=tmp_path)
    assert (spec.distribution.launcher, spec.distribution.nodes) == ("inline", 2)
    (tmp_path / "component.yaml").write_text(spec_text("inline"), encoding="utf-8")
    assert load(tmp_path / "component.yaml").distribution.launcher == "inline"
    assert canonical_launcher("MY-INLINE") == "inline"
    assert launcher_accepted(json_schema("sdk"), "My-Inline")
    assert not launcher_accepted(json_schema("sdk", builtin_launchers()), "My-Inline")


def test_spec_load_without_the_plugin_refuses_its_launcher(tmp_path: Path) -> None:
    with pytest.raises(SpecError) as info:
        loads(spec_text("my-inline"), base_dir=tmp_path)
    assert "unknown launcher 'my-inline'" in str(info.value)


def test_builtin_launchers_come_from_the_launchers_themselves(pm: PluginManager) -> None:
    assert dict(builtin_launchers()) == dict(pm.alias_table())
    assert builtin_launchers()["horovod"] == "mpi"


def test_the_spec_package_keeps_no_copy_of_the_launcher_table() -> None:
    """``BUILTIN_LAUNCHERS`` went (issue 35): ``builtin_launchers()`` is the one way to ask."""
    import distcomp.spec
    import distcomp.spec._types

    for module in (distcomp.spec, distcomp.spec._types):
        assert not hasattr(module, "BUILTIN_LAUNCHERS") and "BUILTIN_LAUNCHERS" not in getattr(module, "__all__", ())


def test_cli_schema_lists_an_installed_plugin_launcher(site: Path, work: Path) -> None:
    with_plugin = distcomp("schema", site=site, cwd=work)
    without = distcomp("schema", site=None, cwd=work)
    assert with_plugin.returncode == without.returncode == 0, with_plugin.stderr + without.stderr
    assert all(launcher_accepted(json.loads(with_plugin.stdout), n) for n in ("fake", "FK", "mpi", "pytorch"))
    assert not any(launcher_accepted(json.loads(without.stdout), n) for n in ("fake", "fk"))
    assert launcher_accepted(json.loads(without.stdout), "mpi")


def test_python_spec_load_sees_an_installed_plugin_without_heavy_imports(site: Path, work: Path) -> None:
    (work / "component.yaml").write_text(spec_text("fk", nodes=2), encoding="utf-8")
    code = ("import json, sys\nimport distcomp.spec\nspec = distcomp.spec.load('component.yaml')\n"
            "heavy = sorted(m for m in ('torch', 'mlflow', 'tensorflow', 'kfp', 'azure.ai.ml') if m in sys.modules)\n"
            "print(json.dumps([spec.distribution.launcher, spec.distribution.nodes, heavy]))\n")
    env = {**os.environ, "PYTHONPATH": str(site)}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=work, env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == ["fake", 2, []]


def test_python_spec_load_without_a_plugin_loads_none(work: Path) -> None:
    """No distribution declares a distcomp plugin (this environment): a spec's launcher alias
    resolves from the built-ins' own names (``base.launchernames.BUILTIN``), with neither pluggy
    nor a launcher module imported; an unknown launcher is still refused, naming the built-ins."""
    (work / "component.yaml").write_text(spec_text("horovod", nodes=2), encoding="utf-8")
    (work / "unknown.yaml").write_text(spec_text("fk", nodes=2), encoding="utf-8")
    code = ("import json, sys\nimport distcomp.spec\nspec = distcomp.spec.load('component.yaml')\n"
            "try:\n    distcomp.spec.load('unknown.yaml')\nexcept distcomp.spec.SpecError as exc:\n    refused = str(exc)\n"
            "loaded = sorted(m for m in sys.modules if m == 'pluggy' or m.startswith(('distcomp.launchers', "
            "'distcomp.core.plugins')))\n"
            "print(json.dumps([spec.distribution.launcher, loaded, refused]))\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=work, env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    launcher, loaded, refused = json.loads(proc.stdout)
    assert (launcher, loaded) == ("mpi", [])
    assert "unknown launcher 'fk'" in refused and "torch.distributed" in refused
