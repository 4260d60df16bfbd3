"""Several processes at once, released together: one winner per version, nothing torn, no lost update."""

from __future__ import annotations

import pytest
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from distcomp.registry import Registry, open_registry
from distcomp.registry._manifest import read_manifest
from tests.conftest import REPO
from tests.registry.conftest import Make

PROCESSES = 8

# Everything is imported before the barrier, so that the publishes really start together.
WORKER = """\
import sys, time
from pathlib import Path
import distcomp.cli, distcomp.core.plugins, distcomp.registry, distcomp.spec
distcomp.core.plugins.get_plugin_manager()
ready, barrier, args = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3:]
ready.write_text("")
while not barrier.exists():
    time.sleep(0.0005)
sys.exit(distcomp.cli.main(args))
"""


def together(tmp_path: Path, commands: list[list[str]]) -> list[subprocess.CompletedProcess[str]]:
    """Run ``distcomp ARGS`` once per command, all released at the same moment."""
    barrier = tmp_path / "go"
    procs = []
    for i, args in enumerate(commands):
        ready = tmp_path / f"ready{i}"
        procs.append((ready, subprocess.Popen([sys.executable, "-c", WORKER, str(ready), str(barrier), *args], cwd=REPO,
                                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)))
    deadline = time.monotonic() + 60
    while not all(r.exists() for r, _p in procs):
        assert time.monotonic() < deadline, "workers did not start"
        assert all(p.poll() is None for _r, p in procs), [p.communicate() for _r, p in procs if p.poll() is not None]
        time.sleep(0.01)
    barrier.write_text("")
    out = []
    for _ready, p in procs:
        stdout, stderr = p.communicate(timeout=60)
        out.append(subprocess.CompletedProcess(p.args, p.returncode, stdout, stderr))
    return out


def big_component(make: Make, i: int, version: str = "1.0.0") -> Path:
    """Enough files that the publishes overlap in time; every file differs between the 8."""
    src = make(version=version, body=f"WHO = {i}\n")
    for n in range(40):
        (src / f"data{n}.txt").write_text(f"{i}:{n}:" + "x" * 20_000)
    return src


@pytest.mark.slow
def test_one_version_from_eight_processes_has_exactly_one_winner(registry: Registry, make: Make,
                                                                 tmp_path: Path) -> None:
    sources = [big_component(make, i) for i in range(PROCESSES)]
    results = together(tmp_path, [["registry", "publish", str(s), "--registry", registry.location] for s in sources])
    winners = [i for i, r in enumerate(results) if r.returncode == 0]
    assert len(winners) == 1, [(r.returncode, r.stdout, r.stderr) for r in results]
    won = winners[0]
    stored = Path(registry.location) / "demo" / "1.0.0"
    resolved = registry.resolve("demo@1.0.0")  # verifies every file against the hash
    assert results[won].stdout == f"published demo@1.0.0 (sha256 {resolved.sha256[:12]})\n"
    assert results[won].stderr == ""
    for i, r in enumerate(results):
        if i != won:
            assert r.returncode == 2
            assert r.stdout == ""
            assert r.stderr.startswith(f"distcomp registry: demo@1.0.0 is already published with different content "
                                       f"(sha256 {resolved.sha256[:12]}, yours ")
            assert r.stderr.endswith("); a published version never changes: publish a new version\n")
            assert "Traceback" not in r.stderr
    # nothing torn: the stored version is exactly the winner's files, none from anyone else
    files = read_manifest(stored, "demo", "1.0.0").files
    assert sorted(files) == sorted(p.name for p in sources[won].iterdir())
    for name in files:
        assert (stored / name).read_bytes() == (sources[won] / name).read_bytes()
    assert list((Path(registry.location) / ".staging").iterdir()) == []
    assert [v.version for v in registry.versions("demo")] == ["1.0.0"]


@pytest.mark.slow
def test_one_version_with_the_same_content_from_eight_processes(registry: Registry, make: Make,
                                                                tmp_path: Path) -> None:
    sources = [big_component(make, 0) for _ in range(PROCESSES)]
    results = together(tmp_path, [["registry", "publish", str(s), "--registry", registry.location] for s in sources])
    assert all(r.returncode == 0 for r in results), [r.stderr for r in results]
    sha = registry.resolve("demo@1.0.0").sha256
    assert sorted(r.stdout for r in results) == (["demo@1.0.0 already published (same content)\n"] * (PROCESSES - 1)
                                                 + [f"published demo@1.0.0 (sha256 {sha[:12]})\n"])


@pytest.mark.slow
def test_different_versions_in_parallel_all_land(registry: Registry, make: Make, tmp_path: Path) -> None:
    sources = [big_component(make, i, version=f"1.{i}.0") for i in range(PROCESSES)]
    results = together(tmp_path, [["registry", "publish", str(s), "--registry", registry.location] for s in sources])
    assert [r.returncode for r in results] == [0] * PROCESSES, [r.stderr for r in results]
    assert [v.version for v in registry.versions("demo")] == [f"1.{i}.0" for i in range(PROCESSES)]
    for i in range(PROCESSES):
        resolved = registry.resolve(f"demo@1.{i}.0")
        assert (resolved.spec_path.parent / "run.py").read_text() == f"WHO = {i}\n"
    assert registry.resolve("demo@latest").version == f"1.{PROCESSES - 1}.0"


@pytest.mark.slow
def test_concurrent_deprecations_are_not_lost(registry: Registry, make: Make, tmp_path: Path) -> None:
    for i in range(PROCESSES):
        registry.publish(make(version=f"1.{i}.0"))
    results = together(tmp_path, [["registry", "deprecate", f"demo@1.{i}.0", "--message", f"m{i}",
                                   "--registry", registry.location] for i in range(PROCESSES)])
    assert [r.returncode for r in results] == [0] * PROCESSES, [r.stderr for r in results]
    assert [(v.version, v.deprecated) for v in registry.versions("demo")] == [
        (f"1.{i}.0", f"m{i}") for i in range(PROCESSES)]
    assert [p.name for p in (Path(registry.location) / "demo").iterdir() if p.name.endswith(".tmp")] == []


# a process that only tries to write the paths it is given, with no distcomp import: run by the
# system Python, which an unprivileged user can reach
WRITE_EACH = ("import sys\nfor p in sys.argv[1:]:\n    try:\n        open(p, 'a').write('x')\n"
              "        print('wrote', p)\n    except PermissionError:\n        print('refused', p)\n")


def test_a_rank_cannot_write_into_a_stored_version(make: Make) -> None:
    """Stored versions are read-only. Run as root (CI), the writer drops to nobody first, as a
    rank of another user would be; root itself writes through permissions and the hash check
    is what catches that (tests/registry/test_tamper.py)."""
    top = Path(tempfile.mkdtemp(prefix="distcomp-readonly-"))
    try:
        top.chmod(0o755)  # reachable by the unprivileged writer
        stored = Path(open_registry(str(top / "registry")).publish(make()).location)
        targets = [str(stored / "new.txt"), str(stored / "run.py")]
        argv = [shutil.which("python3", path="/usr/bin:/bin") or "/usr/bin/python3", "-c", WRITE_EACH, *targets]
        if os.geteuid() == 0:
            # the writer owns the stored files, as a user running their own published component
            # does: only the read-only modes can stop it
            for folder, dirs, files in os.walk(top / "registry"):
                for name in (folder, *(os.path.join(folder, n) for n in dirs + files)):
                    os.chown(name, 65534, 65534, follow_symlinks=False)
            argv = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *argv]
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=30)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.splitlines() == [f"refused {t}" for t in targets]
        assert not (stored / "new.txt").exists()
    finally:
        for folder, _dirs, _files in os.walk(top):
            os.chmod(folder, 0o755)
        shutil.rmtree(top)
