"""Start ``distcomp run`` on jobs/supervision (cheap plain-Python ranks, torch.distributed
contract) as a user does, and look at what outlives it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import psutil

from tests.targets._jobs import JOBS, clean_env

SUPERVISION = JOBS / "supervision" / "component.yaml"


def running_record(where: Path, name: str, **supervisor: object) -> Path:
    """A run folder whose status.json is as a job writes it at start, with the supervisor given
    (no MLflow run)."""
    run_dir = where / name
    run_dir.mkdir(parents=True)
    (run_dir / "status.json").write_text(json.dumps({
        "state": "running", "exit_code": None, "job_id": name, "started_at": time.time() - 60,
        "cookie": os.urandom(8).hex(), "incomplete_outputs": {}, "supervisor": supervisor}))
    return run_dir


def my_start_time() -> int:
    """This process's start time, in clock ticks after boot (/proc/PID/stat field 22)."""
    data = Path(f"/proc/{os.getpid()}/stat").read_bytes()
    return int(data[data.rindex(b")") + 2:].split()[19])


def command(tmp_path: Path, *flags: str, name: str = "job", run_dir: Path | None = None,
            tracking: str | None = None, env: dict[str, str] | None = None,
            **inputs: object) -> tuple[list[str], dict[str, str], Path, Path]:
    """argv and env of ``distcomp run jobs/supervision``, its run folder and state folder."""
    run_dir, state_dir = run_dir or tmp_path / f"{name}-run", tmp_path / f"{name}-state"
    argv = [sys.executable, "-m", "distcomp", "run", str(SUPERVISION), "--run-dir", str(run_dir), *flags,
            "--input", f"state_dir={state_dir}"]
    if tracking is None:
        argv.append("--no-tracking")
    for key, value in inputs.items():
        argv += ["--input", f"{key}={value}"]
    full_env = clean_env(**(env or {}))
    if tracking is not None:
        full_env["MLFLOW_TRACKING_URI"] = tracking
    return argv, full_env, run_dir, state_dir


def launch(tmp_path: Path, *flags: str, **options: object) -> tuple[subprocess.Popen[str], Path, Path]:
    """Start ``distcomp run jobs/supervision`` in ``tmp_path`` (see ``command``)."""
    argv, env, run_dir, state_dir = command(tmp_path, *flags, **options)  # type: ignore[arg-type]
    proc = subprocess.Popen(argv, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return proc, run_dir, state_dir


class Console:
    """The lines ``distcomp run`` printed on stdout so far, read by a thread as they come."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.lines: list[str] = []
        assert proc.stdout is not None
        self._thread = threading.Thread(target=lambda: self.lines.extend(proc.stdout), daemon=True)  # type: ignore[arg-type]
        self._thread.start()

    def wait_for(self, wanted: list[str], timeout: float = 30) -> list[str]:
        end = time.monotonic() + timeout
        while not set(wanted) <= {line.rstrip("\n") for line in self.lines}:
            assert time.monotonic() < end, f"never shown: {sorted(set(wanted) - set(self.lines))}; shown: {self.lines}"
            time.sleep(0.02)
        return [line.rstrip("\n") for line in self.lines]


def status(run_dir: Path) -> dict[str, Any]:
    return json.loads((run_dir / "status.json").read_text(encoding="utf-8"))


def record(state_dir: Path, rank: int, attempt: int = 0) -> dict[str, Any]:
    return json.loads((state_dir / f"rank{rank}.{attempt}.json").read_text(encoding="utf-8"))


def running(pid: int) -> bool:
    """Alive and not a zombie."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def survivors(pids: list[int], within: float = 15.0) -> list[int]:
    """Those of ``pids`` still running after ``within`` seconds; they are killed, so a failing
    test leaves nothing behind."""
    end = time.monotonic() + within
    while any(running(p) for p in pids) and time.monotonic() < end:
        time.sleep(0.05)
    left = [p for p in pids if running(p)]
    for pid in left:
        try:
            os.kill(pid, 9)
        except ProcessLookupError:
            pass
    return left


def everything_under(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` (names relative to it) with its bytes."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}
