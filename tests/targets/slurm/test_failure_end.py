"""Pure: what brings a failed Slurm job's end to its waiting submit sooner (issue 38). The
submit asks Slurm often once the job folder shows the end is near (``_pace``); the batch script
knows from ``_attempts begin`` when no restart is left, and then records the failure while its
EXIT trap sweeps the nodes. The whole path runs on the cluster in
test_slurm.py::test_a_failing_rank_ends_the_job_and_is_named."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

from distcomp.targets.slurm import _attempts, _pace


def _job_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "job"
    (folder / "exits").mkdir(parents=True)
    return folder


def test_a_pause_ends_as_an_exit_record_appears_and_the_next_ones_are_short(tmp_path: Path) -> None:
    folder = _job_folder(tmp_path)
    pace = _pace.Pace(folder)
    start = time.monotonic()
    pace.pause()  # nothing changed: the whole slow pause
    assert time.monotonic() - start >= _pace.POLL * 0.95
    record = folder / "exits" / "rank1.json"
    writer = threading.Timer(0.1, lambda: record.write_text(json.dumps({"name": "rank1", "failed": True})))
    writer.start()
    start = time.monotonic()
    pace.pause()
    waited = time.monotonic() - start
    writer.join()
    assert 0.09 <= waited < _pace.POLL * 0.8, waited  # seen within a tick or so (a loaded machine: later), not at
    # the next poll
    for _ in range(3):  # the end is near: Slurm is asked every FAST seconds a while
        start = time.monotonic()
        pace.pause()
        assert time.monotonic() - start < _pace.POLL / 2
    pace.fast_until = time.monotonic()  # the window past: the slow pace again
    start = time.monotonic()
    pace.pause()
    assert time.monotonic() - start >= _pace.POLL * 0.95


def test_a_pause_ends_when_the_attempts_record_changes_and_never_after_a_deadline(tmp_path: Path) -> None:
    folder = _job_folder(tmp_path)
    (folder / _attempts.FILE).write_text("{}\n")
    pace = _pace.Pace(folder)
    start = time.monotonic()
    pace.pause(0.15)  # the job's deadline (--timeout) comes first
    assert 0.14 <= time.monotonic() - start < _pace.POLL * 0.8
    writer = threading.Timer(0.1, lambda: (folder / _attempts.FILE).write_text('{"attempt": 0, "running": false}\n'))
    writer.start()
    start = time.monotonic()
    pace.pause()
    writer.join()
    assert time.monotonic() - start < _pace.POLL * 0.8


def test_begin_tells_the_script_how_many_restarts_are_left(tmp_path: Path) -> None:
    """The batch script records a failure alongside its sweep only when no restart is left: the
    count it reads from ``begin`` is the one ``failed`` judges by."""
    folder = _job_folder(tmp_path)
    lines = _attempts.begin(folder, 1, {}).splitlines()
    assert f"{_attempts.RESTARTS_LEFT}=1" in lines and not any(_attempts.RESTARTS_LEFT in line and line.startswith(
        "export") for line in lines)  # the script's own: no rank sees it
    assert _attempts.failed(folder, 1)  # a restart was left: the job starts again
    assert f"{_attempts.RESTARTS_LEFT}=0" in _attempts.begin(folder, 1, {}).splitlines()
    assert not _attempts.failed(folder, 1)
    assert json.loads((folder / _attempts.FILE).read_text())["running"] is False
    other = tmp_path / "other"  # a job without restarts: none left from its first attempt
    other.mkdir()
    assert f"{_attempts.RESTARTS_LEFT}=0" in _attempts.begin(other, 0, {}).splitlines()


def test_the_sweep_s_step_starts_with_the_job_and_nothing_that_lasts_holds_its_input(tmp_path: Path) -> None:
    """Pure: the batch script starts the sweep's step before the agents' (its tasks sweep when
    the script's end closes their input); the agents' srun and the failure's recorder close their
    copy of that input, and the recorder never carries the job's cookie (the sweep would stop it)."""
    import subprocess

    import distcomp
    from distcomp.targets._cookie import COOKIE
    from distcomp.targets.slurm._script import CLOSE_SWEEPER, SWEEPER_FD

    from .conftest import JOBS

    text = distcomp.compile(JOBS / "torch" / "component.yaml", "slurm", nodes=2, job_dir=str(tmp_path)).text or ""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"exec {{{SWEEPER_FD}}}> >(exec env -u {COOKIE} "))
    assert "--input=all" in lines[start] and lines[start + 1].strip().startswith("/bin/sh -c 'cat >/dev/null")
    agents = next(i for i, line in enumerate(lines) if "-m distcomp.agent " in line)
    assert start < agents and lines[agents].endswith(f" {CLOSE_SWEEPER} &")
    (recorder,) = [line.strip() for line in lines if "_attempts failed" in line and line.rstrip().endswith("&")]
    assert recorder.startswith(f"(unset {COOKIE}; exec ") and recorder.endswith(f") {CLOSE_SWEEPER} &")
    script = tmp_path / "job.sbatch"
    script.write_text(text)
    assert subprocess.run(["bash", "-n", str(script)], capture_output=True).returncode == 0
