"""One rule for distcomp's per-user cache (base/cachedir.py), which every cache in it follows."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from distcomp.base import methodcache, yamlcache
from distcomp.base.cachedir import cache_dir
from distcomp.core import _epcache
from distcomp.function._filed import functions_cache
from distcomp.mlstore import _template
from distcomp.registry._stored import pycache_prefix


@pytest.mark.parametrize("value", ["", "   "])
def test_an_empty_or_blank_xdg_cache_home_is_the_home_folders_cache(value: str) -> None:
    assert cache_dir("x", env={"XDG_CACHE_HOME": value}) == os.path.join(os.path.expanduser("~"), ".cache", "distcomp", "x")
    assert cache_dir(env={}) == os.path.join(os.path.expanduser("~"), ".cache", "distcomp")


def test_a_relative_xdg_cache_home_is_made_absolute_from_here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert cache_dir("a", "b", env={"XDG_CACHE_HOME": "rel"}) == str(tmp_path / "rel" / "distcomp" / "a" / "b")


def test_every_cache_is_under_the_one_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    env = {"XDG_CACHE_HOME": str(tmp_path)}
    root = tmp_path / "distcomp"
    found = [Path(methodcache.cache_file()), Path(_epcache.cache_file("distcomp.targets")),
             Path(pycache_prefix(env)), functions_cache(env), Path(yamlcache.entry_file("parse", b"x"))]
    kept = _template.template_path(env)
    if kept is not None:  # only where MLflow is installed
        found.append(kept)
    assert all(root in p.parents for p in found), found
    assert {p.relative_to(root).parts[0] for p in found} >= {"dataclasses", "entry-points", "pycache", "functions", "yaml"}
