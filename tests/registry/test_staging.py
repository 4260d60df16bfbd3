"""A publish killed mid-way leaves a staging folder; the next publish removes it, and says so.
A live publisher's staging folder is never touched, whatever its age."""

from __future__ import annotations

import os
import re
import signal
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from distcomp.registry import Registry, RegistryError, open_registry
from distcomp.registry._staging import STALE_S, Leftover, leftover, owner_prefix
from tests.conftest import REPO
from tests.registry.conftest import Make

FILES = 4000  # small files, each written and synced: a publish that lasts long enough to be caught mid-copy


def many_files(make: Make, version: str) -> Path:
    src = make(version=version)
    for n in range(FILES):
        (src / f"f{n:04}.txt").write_text(f"{n}\n")
    return src


def start_publish(src: Path, registry: Registry) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "distcomp", "registry", "publish", str(src), "--registry",
                             registry.location], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def caught_mid_copy(proc: subprocess.Popen[str], staging: Path, sig: int) -> Path:
    """Send ``sig`` to the publisher once its staging folder holds some files, not all; that folder."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"the publish ended before it was caught: {proc.communicate()}"
        for folder in staging.glob("*") if staging.is_dir() else ():
            if len(os.listdir(folder)) > 3:
                proc.send_signal(sig)
                return folder
        time.sleep(0.001)
    proc.kill()
    raise AssertionError("the publish never started copying")


def test_what_a_killed_publish_leaves_is_removed_by_the_next(registry: Registry, make: Make) -> None:
    staging = Path(registry.location) / ".staging"
    proc = start_publish(many_files(make, "2.0.0"), registry)
    left = caught_mid_copy(proc, staging, signal.SIGKILL)
    proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    assert left.is_dir() and registry.versions("demo") == []  # the version never appeared, not even half of it
    files = sum(len(names) for _d, _s, names in os.walk(left))
    assert 0 < files < FILES + 2
    assert left.name.startswith(f"{owner_prefix('demo@2.0.0').split(',')[0]},{proc.pid},")

    again = subprocess.run([sys.executable, "-m", "distcomp", "registry", "publish", str(make(version="1.0.0")),
                            "--registry", registry.location], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert again.returncode == 0, again.stderr
    assert re.fullmatch(r"distcomp registry: note: removed what an interrupted publish left in the registry's "
                        rf"staging area: demo@2\.0\.0: {files} files, \d+\.\d MB \(its publisher \(pid {proc.pid}\) "
                        r"is gone\)\n", again.stderr), again.stderr
    assert list(staging.iterdir()) == []
    assert [v.version for v in registry.versions("demo")] == ["1.0.0"]


@pytest.mark.slow
def test_a_live_publishers_staging_is_left_alone(registry: Registry, make: Make) -> None:
    staging = Path(registry.location) / ".staging"
    proc = start_publish(many_files(make, "2.0.0"), registry)
    try:
        theirs = caught_mid_copy(proc, staging, signal.SIGSTOP)  # alive, but makes no progress
        os.utime(theirs, (1, 1))  # and looks ancient: its owner is alive, so age does not matter
        before = sorted(os.listdir(theirs))
        mine = registry.publish(make(version="1.0.0"))
        assert mine.created and mine.swept == ()
        assert sorted(os.listdir(theirs)) == before
    finally:
        proc.send_signal(signal.SIGCONT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert out.startswith("published demo@2.0.0")
    assert [v.version for v in registry.versions("demo")] == ["1.0.0", "2.0.0"]
    assert registry.resolve("demo@2.0.0").version == "2.0.0"  # every file of it, verified
    assert list(staging.iterdir()) == []


def a_dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", ""])
    proc.wait()
    return proc.pid


def test_which_staging_folders_are_left_over() -> None:
    now = time.time()
    mine = owner_prefix("demo@1.0.0") + "abc"
    host, _pid, start, _rest = mine.split(",", 3)
    dead = f"{host},{a_dead_pid()},{start},demo@1.0.0.abc"
    reused = f"{host},{os.getpid()},{int(start or 0) + 1},demo@1.0.0.abc"  # this pid, another start: not us
    other = f"elsewhere-0000beef,{os.getpid()},1,demo@1.0.0.abc"
    assert leftover(mine, 0.0, now) is None  # alive: never, however old
    assert leftover(dead, now, now) == Leftover("demo@1.0.0", f"its publisher (pid {dead.split(',')[1]}) is gone")
    if start:  # /proc tells start times apart
        assert leftover(reused, now, now) == Leftover("demo@1.0.0", f"its publisher (pid {os.getpid()}) is gone")
    assert leftover(other, now - STALE_S + 60, now) is None  # another host's: cannot be checked, so a day
    assert leftover(other, now - STALE_S - 3600, now) == Leftover(
        "demo@1.0.0", f"unchanged for 25 h (publisher pid {os.getpid()} on elsewhere)")
    assert leftover("demo@1.0.0.k3j2", now - 60, now) is None  # named before owners were recorded: by age only
    assert leftover("demo@1.0.0.k3j2", now - STALE_S - 1, now) == Leftover("demo@1.0.0", "unchanged for 24 h")


def test_the_host_is_named(make: Make) -> None:
    host = owner_prefix("demo@1.0.0").split(",")[0]
    assert host.startswith(re.sub(r"[^A-Za-z0-9.-]", "_", socket.gethostname())[:40])


def test_a_link_in_staging_is_removed_not_followed(registry: Registry, make: Make, tmp_path: Path) -> None:
    """Clearing a leftover opens up read-only folders (chmod): never the ones a planted link leads to."""
    registry.publish(make())
    outside = tmp_path / "outside"
    (outside / "sub").mkdir(parents=True)
    (outside / "sub" / "keep.txt").write_text("keep")
    for folder in (outside / "sub", outside):
        folder.chmod(0o555)
    staging = Path(registry.location) / ".staging"
    link = staging / "demo@9.0.0.planted"
    link.symlink_to(outside)
    os.utime(link, (1, 1), follow_symlinks=False)
    try:
        done = registry.publish(make(version="1.1.0"))
        assert done.swept == ("demo@9.0.0: 1 file, 0.0 MB (unchanged for "
                              f"{(time.time() - 1) / 3600:.0f} h)",)
        assert not os.path.lexists(link)
        assert (outside / "sub" / "keep.txt").read_text() == "keep"
        assert [stat.S_IMODE(p.stat().st_mode) for p in (outside, outside / "sub")] == [0o555, 0o555]
    finally:
        for folder in (outside, outside / "sub"):
            folder.chmod(0o755)


@pytest.mark.parametrize("what", [".staging", "demo", "demo/2.0.0"])
def test_registry_paths_that_are_links_are_refused(registry: Registry, make: Make, tmp_path: Path,
                                                   what: str) -> None:
    """A name, version or staging folder that is a link would lead out of the registry."""
    registry.publish(make())
    elsewhere = open_registry(str(tmp_path / "elsewhere"))
    elsewhere.publish(make(version="2.0.0"))
    root, target = Path(registry.location), Path(elsewhere.location) / what
    if what == "demo":
        os.rename(root / "demo", tmp_path / "moved")
    elif what == ".staging":
        (root / what).rmdir()
    (root / what).symlink_to(target)
    expected = re.escape(f" {root / what} as a symbolic link (to {target}); the registry only uses its own "
                         "folders: remove the link")
    with pytest.raises(RegistryError, match=expected):
        if what == ".staging":
            registry.publish(make(version="3.0.0"))
        else:
            registry.resolve("demo@2.0.0")
    assert list((Path(elsewhere.location) / ".staging").iterdir()) == []
    assert [s.name for s in registry.summaries()] == ([] if what == "demo" else ["demo"])
