"""Issue 38: what `distcomp run`'s own start is spared. The entry points of group ``distcomp``
come from distcomp's cache while no installed distribution changed (``distcomp.core._epcache``),
and a newly installed (or removed, or edited) plugin is seen at once; a run imports nothing it
does not use. Each check runs a fresh interpreter, as a user's command does."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

from distcomp.core import _epcache
from distcomp.core.plugins import BUILTIN_PLUGINS

from ._dists import install
from .test_plugins import install_fake

REPO = Path(__file__).resolve().parents[1]
START = REPO / "benchmarks" / "jobs" / "start" / "component.yaml"  # one rank: `date +%s%N`

# what a fresh process reports: its launchers and their providers, whether it imported
# importlib.metadata, and the cache file it reads
LOOK = """\
import json, sys
from distcomp.core import _epcache
from distcomp.core.plugins import get_plugin_manager
pm = get_plugin_manager()
print(json.dumps([{n: l.provider for n, l in pm.launchers().items()}, "importlib.metadata" in sys.modules,
                  _epcache.cache_file("distcomp"), [str(f) for f in pm.failures]]))
"""


def _look(site: Path, cache: Path) -> tuple[dict[str, str], bool, Path, list[str]]:
    env = {**os.environ, "PYTHONPATH": str(site), "XDG_CACHE_HOME": str(cache)}
    proc = subprocess.run([sys.executable, "-c", LOOK], capture_output=True, text=True, timeout=60, env=env,
                          cwd=site.parent / "cwd")  # on sys.path (''): a folder nothing writes in
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    launchers, imported, file, failures = json.loads(proc.stdout)
    return launchers, imported, Path(file), failures


def _settle(*folders: Path) -> None:
    """Every file and folder under ``folders`` last changed a minute ago: past the cache's racy
    window (a change this recent is never cached, as the file system's mtime step might hide a second)."""
    then = time.time() - 60
    for folder in folders:
        for path in [folder, *folder.rglob("*")]:
            os.utime(path, (then, then))


@pytest.fixture
def site(tmp_path: Path) -> Path:
    (tmp_path / "site").mkdir()
    (tmp_path / "cwd").mkdir()
    _settle(tmp_path / "site", tmp_path / "cwd")
    return tmp_path / "site"


def test_entry_points_come_from_the_cache_until_an_install_and_a_plugin_is_seen_at_once(
        site: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    builtins = {"torch.distributed", "mpi", "tensorflow.distributed", "deepspeed"}

    launchers, _imported, file, _failures = _look(site, cache)
    assert set(launchers) == builtins
    assert file.is_file() and json.loads(file.read_text())["entries"] == []  # kept: nothing declares the group

    install_fake(site)  # a new .dist-info: the folder's mtime moves, the key no longer holds
    launchers, imported, _file, failures = _look(site, cache)
    assert launchers.get("fake") == "fakelauncher 0.1" and not failures
    assert imported  # read from the installed metadata, and (changed just now) not cached yet

    _settle(site)
    assert _look(site, cache)[0].get("fake") == "fakelauncher 0.1"  # read again, now cached
    assert [e[:2] for e in json.loads(file.read_text())["entries"]] == [["fake", "fakelauncher"]]
    launchers, imported, _file, failures = _look(site, cache)
    assert launchers.get("fake") == "fakelauncher 0.1" and not failures  # the plugin, loaded from the cache's entry
    assert not imported  # ... without importlib.metadata: nothing was read but the cache

    shutil.rmtree(site / "fakelauncher-0.1.dist-info")  # uninstalled: gone at once
    shutil.rmtree(site / "fakelauncher")
    assert set(_look(site, cache)[0]) == builtins


def test_an_edit_in_place_of_a_plugins_entry_points_is_seen(site: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    install_fake(site)
    _settle(site)
    assert _look(site, cache)[0].get("fake") == "fakelauncher 0.1"
    assert not _look(site, cache)[1]  # cached
    (site / "fakelauncher-0.1.dist-info" / "entry_points.txt").write_text("[console_scripts]\nfake = fakelauncher:main\n")
    launchers, _imported, _file, failures = _look(site, cache)
    assert "fake" not in launchers and not failures


@pytest.mark.parametrize("content", ["{not json", '{"key": 1, "entries": 2}', "", '{"key": {"files": 3}}',
                                     '[["fake", "x", null]]'])
def test_a_corrupt_cache_is_ignored_and_written_again(site: Path, tmp_path: Path, content: str) -> None:
    cache = tmp_path / "cache"
    install_fake(site)
    _settle(site)
    file = _look(site, cache)[2]
    file.write_text(content)
    launchers, imported, _file, failures = _look(site, cache)
    assert launchers.get("fake") == "fakelauncher 0.1" and not failures
    assert imported  # not trusted: asked importlib.metadata
    assert [e[:2] for e in json.loads(file.read_text())["entries"]] == [["fake", "fakelauncher"]]  # and rewritten


def test_a_stale_cache_of_another_path_is_not_used(site: Path, tmp_path: Path) -> None:
    """A file whose key names another sys.path (a crc clash, a copied home) is not trusted."""
    cache = tmp_path / "cache"
    install_fake(site)
    _settle(site)
    file = _look(site, cache)[2]
    doc = json.loads(file.read_text())
    doc["key"]["path"] = ["/elsewhere"]
    doc["entries"] = []
    file.write_text(json.dumps(doc))
    assert _look(site, cache)[0].get("fake") == "fakelauncher 0.1"


def test_an_unwritable_cache_is_no_error(site: Path, tmp_path: Path) -> None:
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the cache folder would go")
    install_fake(site)
    _settle(site)
    launchers, _imported, _file, failures = _look(site, blocked)
    assert launchers.get("fake") == "fakelauncher 0.1" and not failures


def test_a_plugin_installed_within_the_racy_window_is_not_cached(site: Path, tmp_path: Path) -> None:
    install_fake(site)  # just now: a second change within the mtime's step could go unseen
    launchers, imported, file, _failures = _look(site, tmp_path / "cache")
    assert launchers.get("fake") == "fakelauncher 0.1" and imported
    assert not file.exists()


def test_a_broken_plugin_from_the_cache_is_skipped_as_before(site: Path, tmp_path: Path) -> None:
    install(site, "brokenlauncher", "brokenlauncher", 'raise ImportError("brokenlauncher needs libbroken.so.1")\n',
            "[distcomp]\nbroken = brokenlauncher\n")
    _settle(site)
    cache = tmp_path / "cache"
    first = _look(site, cache)
    second = _look(site, cache)
    assert not second[1]  # the cache's entry
    assert first[0] == second[0] and first[3] == second[3] == [
        "distcomp: plugin 'broken' from brokenlauncher 0.1 skipped: ImportError: brokenlauncher needs libbroken.so.1"]


@pytest.mark.parametrize("value", ["json:dumps", "os.path:join", "json", "json.decoder:JSONDecoder.decode",
                                   "json : dumps [extra]"])
def test_a_cached_entry_point_loads_what_importlib_metadata_loads(value: str) -> None:
    cached = _epcache.CachedEntryPoint("x", value, "distcomp", ("dist", "1.0"))
    assert cached.load() is EntryPoint("x", value, "distcomp").load()
    assert (cached.dist.name, cached.dist.version) == ("dist", "1.0")


def test_a_cached_entry_point_refuses_what_importlib_metadata_refuses() -> None:
    with pytest.raises(ValueError):
        _epcache.CachedEntryPoint("x", "not a module!", "distcomp", None).load()
    with pytest.raises((ValueError, AttributeError)):
        EntryPoint("x", "not a module!", "distcomp").load()


# -- a run imports only what it uses -----------------------------------------------------------------

# What `distcomp run SPEC --no-tracking` of a one-rank local job must not import: the other
# targets, tracking, the plugin machinery's metadata reader, what only a hang watch, a function
# component or a registry job needs, the compression modules, the validators of other platforms.
NOT_IMPORTED = (
    "importlib.metadata", "email", "zipfile", "tempfile", "jsonschema", "mlflow", "requests", "urllib3", "kubernetes",
    "azure", "kfp", "ray", "torch", "bz2", "lzma",
    "distcomp.targets.kfp", "distcomp.targets.kubeflow._compile", "distcomp.targets.azureml", "distcomp.targets.mlflow",
    "distcomp.targets.slurm", "distcomp.targets.ray", "distcomp.tracking", "distcomp.mlstore", "distcomp.delivery",
    "distcomp.runtime", "distcomp.agent.hang", "distcomp.function._component", "distcomp.registry._working",
)

RUN = """\
import json, sys
from distcomp.cli import main
code = main(["run", sys.argv[1], "--quiet", "--no-tracking", "--run-dir", sys.argv[2]])
print(json.dumps([code, sorted(sys.modules)]))
"""


def test_a_run_imports_nothing_it_does_not_use(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-c", RUN, str(START), str(tmp_path / "run")], capture_output=True,
                          text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    code, modules = json.loads(proc.stdout.splitlines()[-1])
    assert code == 0
    assert (tmp_path / "run" / "logs" / "rank0.log").read_text().splitlines()[-1].isdigit()  # the rank ran
    assert "distcomp.targets.local._runner" in modules and "distcomp.spec._loader" in modules  # the real path
    assert set(BUILTIN_PLUGINS) <= set(modules)
    loaded = [m for m in modules if any(m == n or m.startswith(n + ".") for n in NOT_IMPORTED)]
    assert loaded == []


def test_help_imports_no_spec_loader_nor_plugin() -> None:
    proc = subprocess.run([sys.executable, "-c", "import json, sys\nfrom distcomp.cli import main\n"
                           "try:\n    main(['run', '--help'])\nexcept SystemExit:\n    pass\n"
                           "print(json.dumps(sorted(sys.modules)))"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    modules = set(json.loads(proc.stdout.splitlines()[-1]))
    assert "distcomp.cli._run" in modules
    assert not modules & {"yaml", "distcomp.spec", "distcomp.core.plugins", "pluggy", "distcomp.records",
                          "distcomp.targets.local._runner", "importlib.metadata"}


# -- decorate + export: the copy -------------------------------------------------------------------

EXPORT = """\
import sys
sys.path.insert(0, sys.argv[1])
import distcomp
from train import train
distcomp.export(train, sys.argv[2])
"""


def test_an_export_copies_each_file_as_shutil_copy_would(tmp_path: Path) -> None:
    """Content and permission bits of every file (an executable, a read-only file, one of 9 MiB:
    more than one sendfile call, an empty one), a link's target, nested folders; what the
    .gitignore leaves out stays home."""
    project = tmp_path / "project"
    (project / "pkg" / "deep").mkdir(parents=True)
    (project / "train.py").write_text("import distcomp\n\n\n@distcomp.component(name='copy-probe', version='1.0.0')\n"
                                      "def train(epochs: int = 1):\n    pass\n")
    (project / "run.sh").write_text("#!/bin/sh\necho hi\n")
    (project / "run.sh").chmod(0o751)
    (project / "pkg" / "frozen.txt").write_text("do not edit\n")
    (project / "pkg" / "frozen.txt").chmod(0o444)
    (project / "pkg" / "deep" / "big.bin").write_bytes(os.urandom(9 << 20))
    (project / "pkg" / "deep" / "empty.py").write_bytes(b"")
    (project / "pkg" / "linked.txt").symlink_to("frozen.txt")
    (project / ".gitignore").write_text("*.ckpt\n")
    (project / "model.ckpt").write_bytes(b"weights")
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-c", EXPORT, str(project), str(out)], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    shipped = {p.relative_to(out / "code").as_posix(): p for p in (out / "code").rglob("*") if p.is_file()}
    assert sorted(shipped) == [".gitignore", "pkg/deep/big.bin", "pkg/deep/empty.py", "pkg/frozen.txt",
                               "pkg/linked.txt", "run.sh", "train.py"]
    for rel, copy in shipped.items():
        source = project / rel
        assert not copy.is_symlink()
        assert copy.read_bytes() == source.read_bytes(), rel
        assert copy.stat().st_mode == source.stat().st_mode, rel  # shutil.copy's copymode: the link's target's
    assert (out / "component.yaml").is_file()


def test_a_named_pipe_swapped_in_after_the_walk_is_refused_not_waited_on(tmp_path: Path) -> None:
    from distcomp.function._export import _copy

    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    with pytest.raises(OSError, match="not a regular file"):
        _copy({"pipe": pipe}, tmp_path / "code")  # shutil.copy: SpecialFileError; never a hang on the open
    assert not (tmp_path / "code" / "pipe").exists()


# -- the records' generated methods, compiled once (distcomp.base.methodcache) ----------------------

# Every dataclass of every distcomp module a run imports: each generated method's code (compared
# field by field, not by marshal's bytes, which depend on reference counts), annotations, defaults
# and names; and the cache's counters of this process.
METHODS = """\
import hashlib, inspect, json, sys, types
import distcomp.records, distcomp.spec, distcomp.core.plugins, distcomp.targets.local._runner, distcomp.cli._run
from distcomp.base import methodcache

def digest(code):
    consts = tuple(digest(c) if isinstance(c, types.CodeType) else repr(c) for c in code.co_consts)
    parts = (code.co_code, consts, code.co_names, code.co_varnames, code.co_freevars, code.co_cellvars,
             code.co_filename, code.co_name, code.co_qualname, code.co_firstlineno, code.co_linetable,
             code.co_exceptiontable, code.co_flags, code.co_argcount, code.co_kwonlyargcount)
    return hashlib.sha256(repr(parts).encode()).hexdigest()

out = {}
for name, module in sorted(sys.modules.items()):
    if not name.startswith("distcomp") or module is None:
        continue
    for cls in vars(module).values():
        if not (isinstance(cls, type) and cls.__module__ == name and "__dataclass_fields__" in vars(cls)):
            continue
        for method, fn in vars(cls).items():
            fn = inspect.unwrap(fn) if isinstance(fn, types.FunctionType) else None
            if fn is not None and fn.__code__.co_filename == "<string>":
                out[f"{cls.__qualname__}.{method}"] = [digest(fn.__code__), repr(fn.__annotations__), fn.__qualname__,
                                                       repr(fn.__defaults__), repr(fn.__kwdefaults__)]
print(json.dumps([out, methodcache.stats(), "exec" in vars(sys.modules["dataclasses"])]))
"""


def _writes_bytecode() -> dict[str, str]:
    """This environment where Python writes bytecode (this machine sets PYTHONDONTWRITEBYTECODE,
    which the cache honours: it keeps bytecode)."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def _methods(cache: Path, setting: str = "", first: str = "") -> tuple[dict[str, list[str]], dict[str, int], bool]:
    env = {**_writes_bytecode(), "XDG_CACHE_HOME": str(cache), "DISTCOMP_METHOD_CACHE": setting}
    proc = subprocess.run([sys.executable, "-c", first + METHODS], capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    methods, counts, patched = json.loads(proc.stdout.splitlines()[-1])
    return methods, counts, patched


def test_the_records_methods_from_the_cache_are_the_ones_python_makes(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    python, counts, patched = _methods(cache, "off")  # Python's own compile of each text
    assert not patched and counts == {"served": 0, "compiled": 0}
    assert len(python) > 300  # ~80 records, 5-6 methods each
    first, counts, patched = _methods(cache)  # compiled here (a text two records share: once), kept at exit
    made = counts["served"] + counts["compiled"]
    assert patched and counts["compiled"] > 300 and made >= len(python)
    assert first == python
    files = list((cache / "distcomp" / "dataclasses").iterdir())
    assert len(files) == 1 and files[0].name.startswith(sys.implementation.cache_tag)
    again, counts, _patched = _methods(cache)  # every one from the file
    assert counts == {"served": made, "compiled": 0}
    assert again == python


def test_the_cache_is_used_when_dataclasses_was_imported_before_distcomp(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    _methods(cache)
    _methods_, counts, patched = _methods(cache, first="import dataclasses\n")
    assert patched and counts["served"] > 300 and counts["compiled"] == 0


def test_a_users_dataclass_is_compiled_as_always_and_never_kept(tmp_path: Path) -> None:
    """In the script itself and in a module whose name merely starts like distcomp's."""
    (tmp_path / "distcomp_user.py").write_text("import dataclasses\n\n\n@dataclasses.dataclass(frozen=True)\n"
                                                "class Theirs:\n    other_field_name: int = 2\n")
    code = ("import dataclasses, json, marshal, sys\nimport distcomp.records\nfrom distcomp.base import methodcache\n"
            "before = methodcache.stats()\n"
            "@dataclasses.dataclass(frozen=True)\nclass Mine:\n    secret_field_name: int = 1\n"
            "from distcomp_user import Theirs\n"
            "print(json.dumps([before == methodcache.stats(), repr(Mine()), Mine() == Mine(), hash(Mine()) == hash(Mine())]))\n")
    env = {**_writes_bytecode(), "XDG_CACHE_HOME": str(tmp_path / "cache"), "PYTHONPATH": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == [True, "Mine(secret_field_name=1)", True, True]
    kept = next((tmp_path / "cache" / "distcomp" / "dataclasses").iterdir()).read_bytes()
    assert b"secret_field_name" not in kept and b"other_field_name" not in kept  # distcomp's records only
    assert b"processes_per_node" in kept


@pytest.mark.parametrize("content", [b"", b"not marshal at all", b"\x00" * 64, b"[]"])
def test_a_broken_method_cache_is_ignored_and_replaced(tmp_path: Path, content: bytes) -> None:
    cache = tmp_path / "cache"
    python, _counts, _patched = _methods(cache, "off")
    folder = cache / "distcomp" / "dataclasses"
    _methods(cache)
    file = next(folder.iterdir())
    file.write_bytes(content)
    methods, counts, _patched = _methods(cache)
    assert methods == python and counts["compiled"] > 300  # none taken from it
    made = counts["served"] + counts["compiled"]
    assert _methods(cache)[1] == {"served": made, "compiled": 0}  # written again


def test_the_dataclasses_module_is_still_its_own_source_file() -> None:
    code = ("import inspect, json, sys\nimport distcomp\nimport dataclasses\n"
            "print(json.dumps([inspect.getsourcefile(dataclasses), 'def dataclass(' in inspect.getsource(dataclasses),"
            " 'exec' in vars(dataclasses), type(dataclasses.__spec__.loader).__mro__[1].__name__]))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    source, has, patched, base = json.loads(proc.stdout)
    assert source.endswith("dataclasses.py") and has and patched and base == "SourceFileLoader"


def test_no_method_cache_is_written_where_python_writes_no_bytecode(tmp_path: Path) -> None:
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache"), "PYTHONDONTWRITEBYTECODE": "1"}
    proc = subprocess.run([sys.executable, "-c", "import distcomp.records"], capture_output=True, text=True,
                          timeout=60, env=env)
    assert proc.returncode == 0, proc.stderr
    assert not (tmp_path / "cache" / "distcomp" / "dataclasses").exists()
