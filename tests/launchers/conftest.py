"""Run a job under tests/launchers/jobs through the real ``distcomp run`` command, as a user
does, and check what every launcher owes: exit 0, status.json, one result file per rank, and
console lines carrying the ``[rankN]: `` prefix. The ranks check their own contract."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import pytest

JOBS = Path(__file__).resolve().parent / "jobs"
JOB_TIMEOUT = 180  # distcomp's own --timeout; the subprocess gets a margin on top
CONSOLE_LINE = re.compile(r"^\[(rank\d+|launcher\d+)\]: ")
# the outer env must not decide what the ranks see: a test run under torchrun, mpirun or a
# GPU box would otherwise leak its contract into the job
LEAKY = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "NODE_RANK", "MASTER_ADDR",
         "MASTER_PORT", "TF_CONFIG", "CUDA_VISIBLE_DEVICES", "OMP_NUM_THREADS", "AZUREML_MPI_HOSTFILE",
         "AZ_BATCH_MASTER_NODE")
LEAKY_PREFIXES = ("OMPI_", "PMIX_", "PRTE_", "PMI_", "PET_", "TORCHELASTIC_", "ROLE_", "GROUP_")


def clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in LEAKY and not k.startswith(LEAKY_PREFIXES)}


@dataclass
class JobRun:
    proc: subprocess.CompletedProcess[str]
    run_dir: Path
    world: int
    status: dict[str, Any] = field(default_factory=dict)
    results: dict[int, dict[str, Any]] = field(default_factory=dict)

    def log(self, name: str) -> str:
        return (self.run_dir / "logs" / f"{name}.log").read_text(encoding="utf-8", errors="replace")

    def console(self, name: str) -> list[str]:
        """What ``name`` printed, as the console shows it (prefix removed)."""
        prefix = f"[{name}]: "
        return [line[len(prefix):] for line in self.proc.stdout.splitlines() if line.startswith(prefix)]


def _explain(run: JobRun) -> str:
    """Everything needed to see why a job failed, for the assertion message."""
    parts = [f"exit {run.proc.returncode}", "--- stderr (distcomp) ---", run.proc.stderr[-4000:]]
    logs = run.run_dir / "logs"
    for log in sorted(logs.glob("*.log")) if logs.is_dir() else ():
        parts += [f"--- {log.name} (tail) ---", log.read_text(errors="replace")[-3000:]]
    return "\n".join(parts)


def run_job(job: str, tmp_path: Path, world: int, *flags: str, inputs: dict[str, object] | None = None,
            timeout: float = JOB_TIMEOUT) -> JobRun:
    """``distcomp run jobs/JOB/component.yaml`` in ``tmp_path``; checks the common contract."""
    run_dir = tmp_path / "run"
    argv = [sys.executable, "-m", "distcomp", "run", str(JOBS / job / "component.yaml"), "--run-dir", str(run_dir),
            "--timeout", str(timeout), "--grace", "2", "--no-tracking", *flags]
    for name, value in (inputs or {}).items():
        argv += ["--input", f"{name}={value}"]
    proc = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, env=clean_env(),
                          timeout=timeout + 60)
    run = JobRun(proc, run_dir, world)
    assert proc.returncode == 0, _explain(run)
    assert "Traceback" not in proc.stderr, _explain(run)

    run.status = json.loads((run_dir / "status.json").read_text(encoding="utf-8"))
    assert (run.status["state"], run.status["exit_code"], run.status["attempts"]) == ("succeeded", 0, 1), run.status
    assert run.status["root_cause"] is None and run.status["failures"] == []
    assert all(p["returncode"] == 0 for p in run.status["processes"]), run.status["processes"]
    assert "distcomp run: succeeded in " in proc.stderr

    # one result per rank, written by that rank: a rank that silently did nothing fails here
    out = Path(run.status["outputs"]["result"])
    assert out == run_dir / "outputs" / "result"
    assert sorted(p.name for p in out.iterdir()) == [f"rank{r}.json" for r in range(world)], _explain(run)
    for r in range(world):
        result = json.loads((out / f"rank{r}.json").read_text(encoding="utf-8"))
        assert result["rank"] == r
        assert result["all_reduce"] == world * (world + 1) // 2, result
        assert Path(result["cwd"]) == JOBS / job  # the spec's folder (its code)
        assert Path(result["python"]).parent == Path(sys.executable).parent  # `python` is the venv's
        run.results[r] = result
    assert len({res["pid"] for res in run.results.values()}) == world  # real, distinct processes

    # the console: rank output only, every line prefixed; each rank's report came through
    lines = proc.stdout.splitlines()
    assert lines, "no rank output reached the console"
    bad = [line for line in lines if not CONSOLE_LINE.match(line)]
    assert not bad, f"console lines without a [rankN]: prefix: {bad[:5]}"
    for r in range(world):
        assert f"contract ok: rank {r} all_reduce={run.results[r]['all_reduce']}" in run.console(f"rank{r}"), \
            _explain(run)
        assert f"contract ok: rank {r} " in run.log(f"rank{r}")
    return run


@pytest.fixture
def distcomp_run(tmp_path: Path) -> Callable[..., JobRun]:
    def run(job: str, world: int, *flags: str, inputs: dict[str, object] | None = None,
            timeout: float = JOB_TIMEOUT) -> JobRun:
        return run_job(job, tmp_path, world, *flags, inputs=inputs, timeout=timeout)
    return run
