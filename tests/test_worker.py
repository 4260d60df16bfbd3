"""The processes distcomp starts for itself read a versioned job record, never CLI flags
(``python -m distcomp.worker JOB.json``): a background local job is one, and a record written by
a newer distcomp is refused with a message that says what to do, before anything runs."""

from __future__ import annotations

import json
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from distcomp.jobrecord import KEY, VERSION, JobRecord, read_record, write_record

ECHO = ("import os, sys, time\nprint('rank', os.environ['RANK'], 'says', sys.argv[1], flush=True)\n"
        "time.sleep(float(os.environ.get('ECHO_SLEEP', '0')))\n")
SPEC = ("name: echo\ntype: DistributedComponent\ninputs:\n  msg: {type: String}\n"
        "launcher:\n  type: torch.distributed\n  process_count_per_node: 2\n"
        "  additional_arguments: python echo.py {inputs.msg}\n")


def _worker(record: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "distcomp.worker", str(record)], cwd=cwd, capture_output=True,
                          text=True, timeout=120)


@pytest.fixture
def spec(tmp_path: Path) -> Path:
    code = tmp_path / "code"
    code.mkdir()
    (code / "echo.py").write_text(ECHO)
    (code / "component.yaml").write_text(SPEC)
    return code / "component.yaml"


def test_a_run_record_runs_the_job_and_keeps_its_values_exact(spec: Path, tmp_path: Path) -> None:
    message = "it's $(two) words"
    record = write_record(tmp_path / "job.json", JobRecord(
        "run", str(spec), str(tmp_path), {"msg": message}, {}, {}, {"run_dir": str(tmp_path / "run"),
                                                                    "tracking": False}))
    assert stat.S_IMODE(record.stat().st_mode) == 0o600  # it may hold secrets: its owner's only
    done = _worker(record, tmp_path)
    assert done.returncode == 0, done.stderr
    assert f"[rank1]: rank 1 says {message}" in done.stdout
    status = json.loads((tmp_path / "run" / "status.json").read_text())
    assert status["state"] == "succeeded"


def test_a_record_of_a_newer_format_is_refused_before_anything_runs(spec: Path, tmp_path: Path) -> None:
    path = tmp_path / "job.json"
    path.write_text(json.dumps({KEY: VERSION + 1, "action": "run", "spec": str(spec),
                                "options": {"run_dir": str(tmp_path / "run")}}))
    done = _worker(path, tmp_path)
    assert done.returncode == 2
    assert f"a job record of format {VERSION + 1}, written by a newer distcomp" in done.stderr
    assert "upgrade distcomp here" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("text,message", [
    ("not json", "not a job record (not JSON"),
    ('{"action": "run"}', "not a distcomp job record (no 'distcomp_job' version)"),
    (json.dumps({KEY: 1, "action": "explode"}), "unknown action 'explode'"),
    (json.dumps({KEY: 1, "action": "run", "spec": "x", "options": {"rm_rf": True}}), "option 'rm_rf' = True"),
])
def test_a_bad_record_is_one_clear_line(text: str, message: str, tmp_path: Path) -> None:
    path = tmp_path / "job.json"
    path.write_text(text)
    done = _worker(path, tmp_path)
    assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr, done.stderr


def test_the_record_round_trips() -> None:
    record = JobRecord("run", "s.yaml", "/w", {"a": "1"}, {"o": "/p"}, {"E": "v"}, {"nodes": 2})
    assert record.to_json()[KEY] == VERSION


def test_a_background_local_job_runs_from_its_record_not_from_flags(spec: Path, tmp_path: Path) -> None:
    run_dir = tmp_path / "bg"
    done = subprocess.run([sys.executable, "-m", "distcomp", "submit", "--target", "local", str(spec), "--detach",
                           "--run-dir", str(run_dir), "--no-tracking", "-i", "msg=secret-free words",
                           "--env", "ECHO_SLEEP=3"],  # running long enough to read its process's argv
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    record = read_record(run_dir / "job.json")
    assert (record.action, record.inputs) == ("run", {"msg": "secret-free words"})
    assert stat.S_IMODE((run_dir / "job.json").stat().st_mode) == 0o600
    pid = json.loads((run_dir / "status.json").read_text())["supervisor"]["pid"]
    argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[:-1]
    assert argv[1:] == [b"-m", b"distcomp.worker", str(run_dir / "job.json").encode()]  # no flag, no value
    deadline = time.monotonic() + 60
    while json.loads((run_dir / "status.json").read_text())["state"] == "running" and time.monotonic() < deadline:
        time.sleep(0.1)
    assert json.loads((run_dir / "status.json").read_text())["state"] == "succeeded"
    assert "rank 0 says secret-free words" in (run_dir / "console.log").read_text()
