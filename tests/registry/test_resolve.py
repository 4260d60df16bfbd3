"""Resolving references (exact, latest, ranges), deprecation, and ``locate`` as loaders call it."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from distcomp.registry import (
    DeprecatedComponentWarning, Registry, RegistryError, Resolved, VersionInfo, locate, open_registry,
)
from distcomp.spec import load
from tests.registry.conftest import refused, Make

VERSIONS = ("0.9.0", "1.0.0", "1.2.0", "1.10.0", "2.0.0rc1", "2.0.0", "2.1.0")


@pytest.fixture
def published(registry: Registry, make: Make) -> Registry:
    for v in VERSIONS:
        registry.publish(make(version=v, body=f"VERSION = {v!r}\n"))
    return registry


def stored(registry: Registry, version: str) -> Path:
    return Path(registry.location) / "demo" / version / "component.yaml"


@pytest.mark.parametrize(("ref", "version"), [
    ("demo@1.2.0", "1.2.0"), ("demo@1.2", "1.2.0"), ("demo@2.0.0rc1", "2.0.0rc1"), ("demo@latest", "2.1.0"),
    ("demo@^1.2", "1.10.0"), ("demo@~1.2", "1.2.0"), ("demo@>=1.0,<2", "1.10.0"), ("demo@==1.*", "1.10.0"),
    ("demo@~=2.0", "2.1.0"), ("demo@^0.9", "0.9.0"), ("demo@<2", "1.10.0"), ("demo@>=2.0.0rc1,<2.0.0rc2", "2.0.0rc1"),
])
def test_resolve(published: Registry, ref: str, version: str) -> None:
    resolved = published.resolve(ref)
    assert resolved == Resolved("demo", version, resolved.sha256, stored(published, version), None)
    spec = load(resolved.spec_path)
    assert (spec.name, spec.version) == ("demo", version)
    assert (spec.code / "run.py").read_text() == f"VERSION = {version!r}\n"


def test_versions_lists_every_version_in_order(published: Registry) -> None:
    assert published.versions("demo") == [VersionInfo(v, v == "2.0.0rc1") for v in VERSIONS]


def test_deprecate_and_undo(published: Registry) -> None:
    assert published.deprecate("demo@2.1.0", "broken checkpoints; use 2.0.0") == VersionInfo(
        "2.1.0", False, "broken checkpoints; use 2.0.0")
    assert published.resolve("demo@latest").version == "2.0.0"
    assert published.resolve("demo@^2").version == "2.0.0"
    exact = published.resolve("demo@2.1.0")  # an exact reference still works, with a note
    assert (exact.version, exact.deprecated) == ("2.1.0", "demo@2.1.0 is deprecated: broken checkpoints; use 2.0.0")
    assert published.versions("demo")[-1] == VersionInfo("2.1.0", False, "broken checkpoints; use 2.0.0")
    published.deprecate("demo@2.0.0")
    assert published.resolve("demo@latest").version == "1.10.0"
    assert published.resolve("demo@2.0.0").deprecated == "demo@2.0.0 is deprecated"
    assert published.deprecate("demo@2.1.0", undo=True) == VersionInfo("2.1.0", False, None)
    assert published.resolve("demo@latest").version == "2.1.0"
    assert published.resolve("demo@2.1.0").deprecated is None
    assert [v.version for v in published.versions("demo") if v.deprecated is not None] == ["2.0.0"]


def test_deprecate_needs_an_exact_published_version(published: Registry) -> None:
    message = refused(lambda: published.deprecate("demo@^1"))
    assert message == "deprecate takes an exact version, such as demo@1.2.0 (not '^1')"
    message = refused(lambda: published.deprecate("demo@3.0.0"))
    assert message == (f"demo@3.0.0 is not published in the registry at {published.location} (it has "
                       "2.1.0, 2.0.0, 2.0.0rc1, 1.10.0, 1.2.0, 1.0.0, 0.9.0)")


def test_a_range_never_picks_a_deprecated_version_and_says_so(published: Registry) -> None:
    published.deprecate("demo@0.9.0", "too old")
    message = refused(lambda: published.resolve("demo@^0.9"))
    assert message == (f"demo has no version matching '^0.9' in the registry at {published.location} (it has "
                       "2.1.0, 2.0.0, 2.0.0rc1, 1.10.0, 1.2.0, 1.0.0); 0.9.0 matches but is deprecated: name "
                       "it exactly (demo@0.9.0) to use it anyway")


def test_errors_list_versions_and_suggest_names(published: Registry, make: Make) -> None:
    for v in range(12):
        published.publish(make(name="many", version=f"1.{v}.0"))
    cases = {
        "demo@3.0.0": f"demo@3.0.0 is not published in the registry at {published.location} (it has 2.1.0, 2.0.0, "
                      "2.0.0rc1, 1.10.0, 1.2.0, 1.0.0, 0.9.0)",
        "demo@^5": f"demo has no version matching '^5' in the registry at {published.location} (it has 2.1.0, "
                   "2.0.0, 2.0.0rc1, 1.10.0, 1.2.0, 1.0.0, 0.9.0)",
        "many@2": f"many@2.0.0 is not published in the registry at {published.location} (it has 1.11.0, 1.10.0, "
                  "1.9.0, 1.8.0, 1.7.0, 1.6.0, 1.5.0, 1.4.0 and 4 more)",
        "dmeo@latest": f"no component named 'dmeo' in the registry at {published.location}; did you mean 'demo'?",
        "zzz@1.0.0": f"no component named 'zzz' in the registry at {published.location} (it has: demo, many)",
    }
    for ref, message in cases.items():
        assert refused(lambda: published.resolve(ref)) == message


def test_an_empty_registry_says_how_to_publish(registry: Registry) -> None:
    message = refused(lambda: registry.resolve("demo@latest"))
    assert message == (f"no component named 'demo': the registry at {registry.location} is empty; publish "
                       "one with `distcomp registry publish SPEC`")


# -- locate: what every loader calls -----------------------------------------------------------

def test_locate_paths(published: Registry, make: Make, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    src = make()
    assert locate(str(src / "component.yaml")) == src / "component.yaml"
    assert locate(str(src)) == src / "component.yaml"
    (tmp_path / "yml").mkdir()
    (tmp_path / "yml" / "component.yml").write_text("x")
    assert locate(str(tmp_path / "yml")) == tmp_path / "yml" / "component.yml"
    assert locate("missing/component.yaml") == Path("missing/component.yaml")  # the loader reports it
    monkeypatch.chdir(tmp_path)
    (tmp_path / "demo@1.0.0").write_text("a file with an odd name wins")
    assert locate("demo@1.0.0", published.location) == Path("demo@1.0.0")


def test_locate_references(published: Registry) -> None:
    assert locate("demo@latest", published.location) == stored(published, "2.1.0")
    assert locate("demo@^1", published.location) == stored(published, "1.10.0")
    assert locate("demo@>=1.0,<1.5", published.location) == stored(published, "1.2.0")
    with pytest.raises(RegistryError, match="invalid version selector 'x.y' in 'demo@x.y'"):
        locate("demo@x.y", published.location)


def test_locate_tells_about_a_deprecated_version(published: Registry) -> None:
    published.deprecate("demo@1.0.0", "use ^2")
    with pytest.warns(DeprecatedComponentWarning, match="^demo@1.0.0 is deprecated: use \\^2$"):
        assert locate("demo@1.0.0", published.location) == stored(published, "1.0.0")
    told: list[str] = []
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert locate("demo@1.0.0", published.location, warn=told.append) == stored(published, "1.0.0")
        locate("demo@latest", published.location, warn=told.append)
    assert told == ["demo@1.0.0 is deprecated: use ^2"]


def test_the_default_location(published: Registry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DISTCOMP_REGISTRY", published.location)
    assert locate("demo@2.1.0") == stored(published, "2.1.0")
    assert open_registry().location == published.location
    monkeypatch.setenv("DISTCOMP_REGISTRY", "")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert open_registry().location == str(tmp_path / "xdg" / "distcomp" / "registry")
    monkeypatch.delenv("XDG_DATA_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert open_registry().location == str(tmp_path / "home" / ".local" / "share" / "distcomp" / "registry")
    assert open_registry(f"file://{published.location}").location == published.location
    assert open_registry("~/reg").location == str(tmp_path / "home" / "reg")
