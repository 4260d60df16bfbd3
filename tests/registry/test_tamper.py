"""A stored version that changed after publishing is refused on load, naming what changed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Callable

import pytest

from distcomp.registry import Registry, RegistryError, locate
from distcomp.registry._manifest import FileEntry, content_hash
from tests.registry.conftest import refused, Make, mismatch

Tamper = Callable[[Path], None]


def writable(path: Path) -> None:
    os.chmod(path, 0o755 if path.is_dir() else 0o644)


def edit(stored: Path) -> None:
    writable(stored / "run.py")
    with open(stored / "run.py", "a") as f:
        f.write("import os; os.system('curl evil')\n")


def truncate(stored: Path) -> None:
    writable(stored / "run.py")
    with open(stored / "run.py", "r+") as f:
        f.truncate(3)


def add(stored: Path) -> None:
    writable(stored)
    (stored / "extra.py").write_text("x")


def delete(stored: Path) -> None:
    writable(stored)
    (stored / "run.py").unlink()


def link(stored: Path) -> None:
    writable(stored)
    (stored / "other.py").symlink_to(stored / "run.py")


def executable(stored: Path) -> None:
    os.chmod(stored / "run.py", 0o555)


def rewrite_manifest(stored: Path) -> None:
    writable(stored / "manifest.json")
    data = json.loads((stored / "manifest.json").read_text())
    data["files"]["run.py"]["sha256"] = "0" * 64
    (stored / "manifest.json").write_text(json.dumps(data))


def drop_manifest(stored: Path) -> None:
    writable(stored)
    (stored / "manifest.json").unlink()


@pytest.mark.parametrize(("tamper", "what"), [
    (edit, "run.py changed"),
    (truncate, "run.py changed"),
    (add, "extra.py was added"),
    (delete, "run.py is missing"),
    (link, "other.py was added"),
    (executable, "run.py changed (its executable bit)"),
    (rewrite_manifest, "manifest.json changed (its file list no longer gives its sha256)"),
    (drop_manifest, "manifest.json is missing"),
], ids=lambda x: getattr(x, "__name__", ""))
def test_a_changed_version_is_refused(registry: Registry, make: Make, tamper: Tamper, what: str) -> None:
    done = registry.publish(make())
    stored = Path(done.location)
    tamper(stored)
    expected = mismatch(stored, what)
    for attempt in (lambda: registry.resolve("demo@1.0.0"), lambda: registry.resolve("demo@latest"),
                    lambda: locate("demo@^1", registry.location),
                    lambda: registry.publish(make())):  # the same content again: refused too, not a quiet no-op
        assert refused(lambda: attempt()) == expected


def test_a_manifest_pointing_outside_is_refused(registry: Registry, make: Make) -> None:
    stored = Path(registry.publish(make()).location)
    writable(stored / "manifest.json")
    data = json.loads((stored / "manifest.json").read_text())
    data["files"]["../../outside.py"] = data["files"].pop("run.py")
    # the listing hash is recomputed too: only the path check can catch it
    data["sha256"] = content_hash({p: FileEntry(**e) for p, e in data["files"].items()})
    (stored / "manifest.json").write_text(json.dumps(data))
    message = refused(lambda: registry.resolve("demo@1.0.0"))
    assert message == (f"stored demo@1.0.0 at {stored} has a damaged manifest.json (bad file entry "
                       "'../../outside.py'); the registry copy was modified after publishing — "
                       "republishing the same version is refused; publish a new version or restore it")


def test_a_manifest_of_another_version_is_refused(registry: Registry, make: Make) -> None:
    one = Path(registry.publish(make(version="1.0.0", body="a\n")).location)
    two = Path(registry.publish(make(version="2.0.0", body="b\n")).location)
    writable(one)
    writable(one / "manifest.json")
    (one / "manifest.json").write_text((two / "manifest.json").read_text())
    with pytest.raises(RegistryError, match="has a damaged manifest.json \\(it describes demo@2.0.0\\)"):
        registry.resolve("demo@1.0.0")


@pytest.mark.parametrize("planted", ["__pycache__/run.cpython-311.pyc", "pkg/__pycache__/mod.cpython-311.pyc",
                                     "run.pyc"])
def test_planted_bytecode_is_refused(registry: Registry, make: Make, planted: str) -> None:
    """Python runs a .pyc found in __pycache__ instead of its source: no hash covers one, so a
    stored version holding one does not verify (ranks keep their bytecode elsewhere)."""
    src = make()
    (src / "pkg").mkdir()
    (src / "pkg" / "mod.py").write_text("X = 1\n")
    stored = Path(registry.publish(src).location)
    folder = (stored / planted).parent
    writable(stored)
    if folder != stored:
        writable(folder.parent)
        folder.mkdir(exist_ok=True)
    (stored / planted).write_bytes(b"\0")
    assert refused(lambda: registry.resolve("demo@1.0.0")) == mismatch(stored, f"{planted} was added")
    show = subprocess.run([sys.executable, "-m", "distcomp", "registry", "show", "demo@1.0.0", "--registry",
                           registry.location], capture_output=True, text=True, timeout=120)
    assert (show.returncode, show.stdout) == (2, "")  # it no longer says "verified"
    assert show.stderr == f"distcomp registry: {mismatch(stored, f'{planted} was added')}\n"
