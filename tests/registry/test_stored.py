"""stored_version(): is a path stored code? stored_code_env(): how a rank of such a job runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from distcomp.registry import Registry, locate, pycache_prefix, stored_code_env, stored_version
from tests.registry.conftest import Make, mismatch, refused


def test_paths_inside_a_stored_version_are_known(registry: Registry, make: Make, tmp_path: Path) -> None:
    src = make()
    (src / "pkg").mkdir()
    (src / "pkg" / "mod.py").write_text("X = 1\n")
    stored = Path(registry.publish(src).location)
    for path in (stored, stored / "run.py", stored / "pkg", stored / "pkg" / "mod.py", stored / "pkg" / "nothing"):
        assert stored_version(path) == stored
    for path in (src, src / "run.py", Path(registry.location), Path(registry.location) / "demo", tmp_path, Path("/")):
        assert stored_version(path) is None


def test_a_manifest_of_another_name_or_version_is_not_a_stored_version(tmp_path: Path) -> None:
    folder = tmp_path / "demo" / "1.0.0"
    folder.mkdir(parents=True)
    for data in ({"format": 1, "name": "demo", "version": "2.0.0"}, {"format": 1, "name": "other", "version": "1.0.0"},
                 {"format": 2, "name": "demo", "version": "1.0.0"}, ["demo"]):
        (folder / "manifest.json").write_text(json.dumps(data))
        assert stored_version(folder) is None
    (folder / "manifest.json").write_text("{not json")
    assert stored_version(folder) is None
    (folder / "manifest.json").write_text(json.dumps({"format": 1, "name": "demo", "version": "1.0.0"}))
    assert stored_version(folder / "x.py") == folder


def test_ranks_of_stored_code_keep_bytecode_in_the_user_cache(registry: Registry, make: Make, tmp_path: Path) -> None:
    stored = Path(registry.publish(make()).location)
    outer = {"PATH": "/bin", "XDG_CACHE_HOME": str(tmp_path / "cache"), "PYTHONDONTWRITEBYTECODE": "1"}
    env = stored_code_env(stored, outer)
    assert env == {"PATH": "/bin", "XDG_CACHE_HOME": str(tmp_path / "cache"),
                   "PYTHONPYCACHEPREFIX": str(tmp_path / "cache" / "distcomp" / "pycache")}
    assert outer["PYTHONDONTWRITEBYTECODE"] == "1"  # the caller's mapping is not changed
    # a spec that asks for no bytecode gets none; a prefix given by anyone else is replaced
    kept = stored_code_env(stored, {**outer, "PYTHONPYCACHEPREFIX": str(stored)}, {"PYTHONDONTWRITEBYTECODE": "1"})
    assert kept["PYTHONDONTWRITEBYTECODE"] == "1" and kept["PYTHONPYCACHEPREFIX"] == env["PYTHONPYCACHEPREFIX"]
    assert stored_code_env(tmp_path, outer) == outer  # a plain project folder: as it was


def test_the_cache_defaults_to_the_home_cache_folder() -> None:
    assert pycache_prefix({}) == str(Path.home() / ".cache" / "distcomp" / "pycache")
    assert pycache_prefix({"XDG_CACHE_HOME": "/var/cache/u"}) == "/var/cache/u/distcomp/pycache"


@pytest.mark.parametrize("given", ["spec", "folder", "code file"])
def test_a_stored_copy_named_by_its_path_is_verified_too(registry: Registry, make: Make, given: str) -> None:
    stored = Path(registry.publish(make()).location)
    path = {"spec": stored / "component.yaml", "folder": stored, "code file": stored / "run.py"}[given]
    assert locate(str(path)).parent == stored
    (stored / "run.py").chmod(0o644)
    (stored / "run.py").write_text("print('changed')\n")
    assert refused(lambda: locate(str(path))) == mismatch(stored, "run.py changed")
