"""Run ``distcomp run`` on the jobs under tests/targets/jobs as a user does (a real
subprocess, in its own folder) and look at what it left: exit code, console, stderr,
status.json, rank logs, and whether any process it started is still alive."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

JOBS = Path(__file__).resolve().parent / "jobs"
FAULT = JOBS / "fault" / "component.yaml"
# the outer env must not decide what the ranks see (a test run under torchrun or mpirun)
LEAKY = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "NODE_RANK", "MASTER_ADDR",
         "MASTER_PORT", "OMP_NUM_THREADS", "CUDA_VISIBLE_DEVICES")
LEAKY_PREFIXES = ("TORCHELASTIC_", "OMPI_", "PMIX_", "PMI_", "ROLE_", "GROUP_")
WAIT = 60  # seconds any single distcomp run may take before the test gives up on it


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in LEAKY and not k.startswith(LEAKY_PREFIXES)}
    env.update(extra)
    return env


def distcomp_argv(spec: Path, *flags: str, **inputs: object) -> list[str]:
    # tracking has its own tests (tests/tracking); here it would only add a database per test
    argv = [sys.executable, "-m", "distcomp", "run", str(spec), "--no-tracking", *flags]
    for name, value in inputs.items():
        argv += ["--input", f"{name}={value}"]
    return argv


@dataclass
class Run:
    """One finished ``distcomp run`` of the fault job."""

    returncode: int
    stdout: str
    stderr: str
    elapsed: float
    run_dir: Path
    state_dir: Path

    @property
    def status(self) -> dict[str, Any]:
        return json.loads((self.run_dir / "status.json").read_text(encoding="utf-8"))

    def log(self, name: str) -> str:
        return (self.run_dir / "logs" / f"{name}.log").read_text(encoding="utf-8", errors="replace")

    def log_bytes(self, name: str) -> bytes:
        return (self.run_dir / "logs" / f"{name}.log").read_bytes()

    def record(self, rank: int, attempt: int = 0) -> dict[str, Any]:
        """What rank ``rank`` wrote about itself when attempt ``attempt`` started."""
        return json.loads((self.state_dir / f"rank{rank}.{attempt}.json").read_text(encoding="utf-8"))

    def console(self, name: str) -> list[str]:
        prefix = f"[{name}]: "
        return [line[len(prefix):] for line in self.stdout.splitlines() if line.startswith(prefix)]

    def explain(self) -> str:
        parts = [f"exit {self.returncode} after {self.elapsed:.1f} s", "--- stderr ---", self.stderr[-4000:],
                 "--- stdout ---", self.stdout[-2000:]]
        logs = self.run_dir / "logs"
        for log in sorted(logs.glob("*.log")) if logs.is_dir() else ():
            parts += [f"--- {log.name} ---", log.read_text(errors="replace")[-2000:]]
        return "\n".join(parts)


def start(tmp_path: Path, *flags: str, name: str = "job", **inputs: object) -> tuple[subprocess.Popen[str], Path, Path]:
    """Start ``distcomp run`` of the fault job in ``tmp_path``; its run dir and state dir."""
    run_dir, state_dir = tmp_path / f"{name}-run", tmp_path / f"{name}-state"
    argv = distcomp_argv(FAULT, "--run-dir", str(run_dir), *flags, state_dir=state_dir, **inputs)
    proc = subprocess.Popen(argv, cwd=tmp_path, env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            encoding="utf-8")  # strict: whatever a rank wrote, distcomp prints text
    return proc, run_dir, state_dir


def finish(proc: subprocess.Popen[str], run_dir: Path, state_dir: Path, t0: float) -> Run:
    try:
        out, err = proc.communicate(timeout=WAIT)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(f"distcomp run did not end within {WAIT} s\n{err}\n{out[-2000:]}") from None
    return Run(proc.returncode, out, err, time.monotonic() - t0, run_dir, state_dir)


def run_fault(tmp_path: Path, *flags: str, name: str = "job", **inputs: object) -> Run:
    """``distcomp run jobs/fault/component.yaml --run-dir TMP/job-run FLAGS --input ...``."""
    t0 = time.monotonic()
    proc, run_dir, state_dir = start(tmp_path, *flags, name=name, **inputs)
    return finish(proc, run_dir, state_dir, t0)


def wait_for(paths: list[Path], proc: subprocess.Popen[str] | None = None, timeout: float = 30) -> None:
    end = time.monotonic() + timeout
    while not all(p.exists() for p in paths):
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"distcomp ended ({proc.returncode}) before {paths} appeared:\n"
                                 f"{proc.stderr.read() if proc.stderr else ''}")
        if time.monotonic() > end:
            raise AssertionError(f"{[str(p) for p in paths if not p.exists()]} did not appear in {timeout} s")
        time.sleep(0.02)


def started_pids(state_dir: Path) -> dict[str, int]:
    """Every process the job's ranks said they were or started: ``rank1.0`` / ``rank1.0/grandchild``."""
    pids = {}
    for path in sorted(state_dir.glob("rank*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        pids[path.stem] = data["pid"]
        if data.get("grandchild"):
            pids[f"{path.stem}/grandchild"] = data["grandchild"]
    return pids


def alive(pid: int) -> bool:
    """Running, and still one of ours: a zombie is dead (init reaps it when it gets to it);
    a pid taken over by some unrelated program is not one of ours."""
    try:
        p = psutil.Process(pid)
        if p.status() == psutil.STATUS_ZOMBIE:
            return False
        cmd = " ".join(p.cmdline())
    except (psutil.NoSuchProcess, psutil.ZombieProcess):
        return False
    except psutil.AccessDenied:
        return True
    return "rank.py" in cmd or "sleep" in cmd or "signal.SIG_IGN" in cmd


def _ranks_by_cmdline(state_dir: Path) -> dict[str, int]:
    """Ranks of this test's job found by their command line, recorded or not (a rank killed,
    or left behind, before it wrote its record)."""
    found = {}
    for p in psutil.process_iter(["pid", "cmdline"]):
        if str(state_dir) in " ".join(p.info["cmdline"] or ()):
            found[f"pid {p.info['pid']}"] = p.info["pid"]
    return found


def assert_no_survivors(state_dir: Path, expected: int, at_least: int | None = None) -> dict[str, int]:
    """Every process the job's ranks recorded (and any rank of this job found by its command
    line) is gone, now that distcomp has exited; a SIGKILL sent just before it exited gets a
    moment to land. Whatever survived is killed, so it cannot disturb the next test."""
    recorded = started_pids(state_dir)
    pids = {**{k: v for k, v in _ranks_by_cmdline(state_dir).items() if v not in recorded.values()}, **recorded}
    end = time.monotonic() + 2.0
    while any(alive(pid) for pid in pids.values()) and time.monotonic() < end:
        time.sleep(0.05)
    survivors = {name: pid for name, pid in pids.items() if alive(pid)}
    for pid in survivors.values():
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    assert not survivors, f"still running after distcomp exited: {survivors}"
    if at_least is None:
        assert len(recorded) == expected, f"expected {expected} recorded processes, got {recorded}"
    else:  # the job may end before every rank has recorded itself; those were found by command line
        assert at_least <= len(recorded) <= expected, f"expected {at_least}..{expected} recorded, got {recorded}"
    return recorded


# the `mine` launcher's job: results in {outputs.result} (or an input), an input fail_rank
MINE_SPEC = ("name: mine-job\ntype: DistributedComponent\n"
             "inputs:\n  fail_rank: {type: Integer, default: -1}\n"
             "outputs:\n  result: {type: AnyDirectory}\n"
             "launcher:\n  type: mine\n  additional_arguments: python rank.py {outputs.result} {inputs.fail_rank}\n")


def plugin_job(tmp: Path, rank_script: str, spec: str = MINE_SPEC) -> tuple[Path, Path]:
    """The ``mine`` launcher of the hookspec's own docstring installed through its entry point
    as pip leaves it (in ``tmp/site``: put it on PYTHONPATH), and a job of it: ``spec`` with
    ``rank_script`` as its rank.py in ``tmp/code``. Returns (the spec's path, the site)."""
    from distcomp.core.hookspec import DistcompSpecs

    from .._dists import install
    from ..test_plugins import example_code

    site, code = tmp / "site", tmp / "code"
    install(site, "mypkg", "mypkg", example_code(DistcompSpecs.distcomp_launchers.__doc__ or ""),
            "[distcomp]\nmine = mypkg\n")
    code.mkdir()
    (code / "rank.py").write_text(rank_script)
    (code / "component.yaml").write_text(spec)
    return code / "component.yaml", site
