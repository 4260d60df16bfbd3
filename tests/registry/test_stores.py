"""Stores come from the ``distcomp_registry_stores`` hook: the built-in ``file`` one, and plugins."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from distcomp.core.hookspec import hookimpl
from distcomp.core.plugins import PluginManager
from distcomp.records import RegistryStoreType
from distcomp.registry import DirectoryStore, Registry, RegistryError, RegistryStore, open_registry
from tests.registry.conftest import refused, Make


@pytest.fixture
def pm() -> PluginManager:
    manager = PluginManager()
    manager.load_builtins()
    return manager


def stores(*kinds: RegistryStoreType) -> SimpleNamespace:
    """A plugin (any object with hookimpls will do) providing these store types."""
    @hookimpl
    def distcomp_registry_stores():  # type: ignore[no-untyped-def]
        yield from kinds

    return SimpleNamespace(distcomp_registry_stores=distcomp_registry_stores)


def team_stores(base: Path) -> SimpleNamespace:
    """A second directory store under another scheme: ``team://NAME`` is a folder under ``base``."""
    return stores(RegistryStoreType("team", lambda location: DirectoryStore(base / location[len("team://"):]),
                                    "one folder per team"))


def test_the_builtin_store_registers_through_the_hook(pm: PluginManager) -> None:
    found = pm.registry_stores()
    assert list(found) == ["file"]
    kind, provider = found["file"]
    assert provider == "distcomp"
    assert kind.description == "a folder, local or on a shared file system (the default)"
    assert isinstance(kind.factory("/x"), RegistryStore)


def test_a_plugin_store_serves_its_scheme(pm: PluginManager, make: Make, tmp_path: Path) -> None:
    pm.register_plugin(team_stores(tmp_path / "teams"), name="team-stores", provider="teamstore 1.0")
    registry = open_registry("team://vision", pm=pm)
    assert registry.location == str(tmp_path / "teams" / "vision")
    done = registry.publish(make())
    assert done.location == str(tmp_path / "teams" / "vision" / "demo" / "1.0.0")
    assert registry.resolve("demo@latest").sha256 == done.sha256
    assert open_registry("TEAM://vision", pm=pm).resolve("demo@1").version == "1.0.0"  # schemes ignore case


def test_an_unknown_scheme_lists_the_known_ones(pm: PluginManager) -> None:
    pm.register_plugin(team_stores(Path("/unused")), name="team-stores", provider="teamstore 1.0")
    message = refused(lambda: open_registry("s3://bucket/components", pm=pm))
    assert message == ("registry 's3://bucket/components': unknown registry store scheme 's3'; known "
                       "schemes: file, team (a plugin adds one through the distcomp_registry_stores hook)")


def test_two_providers_of_one_scheme_are_named(pm: PluginManager) -> None:
    pm.register_plugin(stores(RegistryStoreType("file", DirectoryStore)), name="again", provider="otherstore 2.0")
    message = refused(lambda: open_registry("/tmp/x", pm=pm))
    assert message == ("registry '/tmp/x': the registry store scheme 'file' is provided twice: by distcomp and "
                       "by otherstore 2.0; uninstall or disable one of them")


def test_a_failing_store_factory_is_named(pm: PluginManager) -> None:
    def broken(location: str) -> RegistryStore:
        raise ConnectionError("no route to bucket")

    pm.register_plugin(stores(RegistryStoreType("s3", broken)), name="broken", provider="s3store 0.1")
    message = refused(lambda: open_registry("s3://bucket", pm=pm))
    assert message == ("registry 's3://bucket': the 's3' store from s3store 0.1 failed: ConnectionError: no "
                       "route to bucket")


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"scheme": "S3", "factory": DirectoryStore}, "RegistryStoreType scheme 'S3': expected a URI scheme"),
    ({"scheme": "3s", "factory": DirectoryStore}, "RegistryStoreType scheme '3s': expected a URI scheme"),
    ({"scheme": "s3", "factory": "nope"}, "RegistryStoreType 's3': factory must be callable"),
])
def test_store_types_check_themselves(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        RegistryStoreType(**kwargs)


@pytest.mark.parametrize("bad", ["..", ".", "a/b", "/abs", ".staging", "", "a\\b"])
def test_the_directory_store_never_leaves_its_root(tmp_path: Path, bad: str) -> None:
    store = DirectoryStore(tmp_path)
    for call in (lambda: store.folder(bad, "1.0.0"), lambda: store.folder("demo", bad), lambda: store.versions(bad),
                 lambda: store.metadata(bad), lambda: store.stage(bad, "1.0.0")):
        with pytest.raises(RegistryError, match="cannot be a registry name or version"):
            call()


def test_registry_records_are_frozen(registry: Registry, make: Make) -> None:
    done = registry.publish(make())
    with pytest.raises(AttributeError):
        done.version = "2"  # type: ignore[misc]


def test_the_package_loads_its_modules_on_first_use() -> None:
    import subprocess
    import sys

    import distcomp.registry as package

    assert sorted(package.__all__) == sorted(name for names in package._MODULES.values() for name in names)
    assert all(getattr(package, name) is not None for name in package.__all__)
    code = ("import sys, distcomp.core.plugins as p; p.get_plugin_manager(); "
            "print(sorted(m for m in sys.modules if m.startswith('distcomp.registry')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out == "['distcomp.registry', 'distcomp.registry._builtin']\n"
