"""A reap kills only what is the job's: a process carrying its cookie, one in its cgroup, or an
orphan its own watchdog noted in ``RUN_DIR/.distcomp.adopted`` under the job's signature. A note
someone else wrote (or a line of it changed) names no process to stop: an unrelated ``sleep``
of this user's, listed there, outlives ``distcomp reap`` and the watchdog, while the job's ranks
and the daemons they left (no cookie, no cgroup: found through the real note) are stopped."""

from __future__ import annotations

import hmac
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import pytest

from distcomp.core.jobrecord import JobRecord, write_record
from distcomp.targets.local._claim import ADOPTED, REAP_RECORD
from distcomp.targets.local._reap import adopted
from tests.targets._jobs import WAIT, clean_env, wait_for
from tests.targets._supervised import launch, my_start_time, record, running, status, survivors


def _start_time(pid: int) -> int:
    data = Path(f"/proc/{pid}/stat").read_bytes()
    return int(data[data.rindex(b")") + 2:].split()[19])


@pytest.fixture
def bystander() -> Iterator[int]:
    """An unrelated process of this user's (no cookie, no job's cgroup): it must outlive any reap."""
    proc = subprocess.Popen(["sleep", "300"], env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")})
    try:
        yield proc.pid
    finally:
        proc.kill()
        proc.wait()


def _sign(key: str, pid: int, start: int) -> str:
    return hmac.new(key.encode(), f"{pid} {start}".encode(), "sha256").hexdigest()


def test_only_lines_signed_with_the_jobs_key_count(tmp_path: Path) -> None:
    me, start, key = os.getpid(), my_start_time(), "k" * 32
    note = tmp_path / ADOPTED
    for text in (f"{me} {start}\n",  # today's format, or a forger's: no signature
                 f"{me} {start} {_sign('another key', me, start)}\n",
                 f"{me} {start} {_sign(key, me + 1, start)}\n",  # a real line's signature on another pid
                 f"{me} {start} {_sign(key, me, start)[:-1]}\n"):
        note.write_text(text)
        assert adopted(tmp_path, key) == set(), text
    note.write_text(f"{me} {start} {_sign(key, me, start)}\n")
    assert adopted(tmp_path, key) == {me}
    assert adopted(tmp_path, None) == set()  # no key (no reap record): the note names nothing
    # reap finds the key in the job's reap record, which must be this user's and no one else's to write
    from distcomp.targets.local._reap import note_key

    path = write_record(tmp_path / REAP_RECORD, JobRecord("reap", options={"run_dir": str(tmp_path), "lock_fd": 3,
                                                                           "note_key": key}))
    assert note_key(tmp_path) == key
    path.chmod(0o666)
    assert note_key(tmp_path) is None


def _escaping_job(tmp_path: Path) -> tuple[subprocess.Popen[str], Path, list[int], list[int]]:
    """A job without a cgroup whose two ranks each left a daemon with no cookie, once its
    watchdog has noted them (the only way a reap can find them)."""
    proc, run_dir, state_dir = launch(tmp_path, "--grace", "2", mode="escape_setsid", end="wait",
                                      env={"DISTCOMP_CGROUP": "off"})
    wait_for([state_dir / "rank0.0.json", state_dir / "rank1.0.json"], proc)
    escaped = [pid for r in (0, 1) for pid in record(state_dir, r)["started"]]
    ranks = [record(state_dir, r)["pid"] for r in (0, 1)]
    assert status(run_dir)["cgroup"] is None and len(escaped) == 2
    note = run_dir / ADOPTED
    deadline = time.monotonic() + WAIT
    while not (note.exists() and {int(line.split()[0]) for line in note.read_text().splitlines()} >= set(escaped)):
        assert time.monotonic() < deadline, "the watchdog never noted the daemons"
        time.sleep(0.05)
    return proc, run_dir, escaped, ranks


def _forge(run_dir: Path, pid: int) -> None:
    """Add the bystander to the watchdog's note, as a forger would (they lack the job's key)."""
    note = run_dir / ADOPTED
    note.write_text(note.read_text() + f"{pid} {_start_time(pid)}\n{pid} {_start_time(pid)} {'0' * 64}\n")


@pytest.mark.slow
def test_reap_does_not_kill_a_process_a_forged_note_names(tmp_path: Path, bystander: int) -> None:
    proc, run_dir, escaped, ranks = _escaping_job(tmp_path)
    watchdog = status(run_dir)["supervisor"]["watchdog_pid"]
    os.kill(watchdog, signal.SIGKILL)  # both gone: the note is all that tells the daemons
    assert survivors([watchdog], 5) == []
    proc.kill()
    proc.communicate(timeout=WAIT)
    _forge(run_dir, bystander)

    reap = subprocess.run([sys.executable, "-m", "distcomp", "reap", "--grace", "2", str(run_dir)], cwd=tmp_path,
                          env=clean_env(), capture_output=True, text=True, timeout=WAIT)
    assert reap.returncode == 0, reap.stderr
    assert survivors(escaped + ranks, 5) == [], reap.stdout  # the job's: its ranks, and the daemons truly noted
    assert running(bystander), "reap killed a process that was never the job's"
    assert status(run_dir)["state"] == "failed"


@pytest.mark.slow
def test_the_watchdog_does_not_kill_a_process_a_forged_note_names(tmp_path: Path, bystander: int) -> None:
    proc, run_dir, escaped, ranks = _escaping_job(tmp_path)
    _forge(run_dir, bystander)
    proc.kill()  # the watchdog reaps: with the key its record holds, the forged lines name nothing
    proc.communicate(timeout=WAIT)
    assert survivors(escaped + ranks) == []
    assert running(bystander), "the watchdog killed a process that was never the job's"
    assert status(run_dir)["state"] == "failed"


@pytest.mark.slow
def test_the_watchdog_trusts_its_own_record_under_any_umask(tmp_path: Path) -> None:
    """A user whose umask is 000: the run folder distcomp makes is still no one else's to write,
    the reap record in it mode 600, so the watchdog's worker runs it when the supervisor dies."""
    old = os.umask(0)
    try:
        proc, run_dir, state_dir = launch(tmp_path, "--grace", "2", mode="talk")
    finally:
        os.umask(old)
    wait_for([state_dir / "rank0.0.json", state_dir / "rank1.0.json"], proc)
    assert run_dir.stat().st_mode & 0o002 == 0
    assert (run_dir / REAP_RECORD).stat().st_mode & 0o777 == 0o600
    ranks = [record(state_dir, r)["pid"] for r in (0, 1)]
    proc.kill()
    _, err = proc.communicate(timeout=WAIT)
    assert survivors(ranks) == [], err
    final = status(run_dir)
    assert (final["state"], final["reaped"]["by"]) == ("failed", "watchdog"), err
