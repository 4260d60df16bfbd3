"""Run ``distcomp run`` on the probe job (tests/tracking/jobs/probe) as a user does, and read
back the MLflow run it made."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any, Mapping

from mlflow import MlflowClient

from ..targets._jobs import clean_env

PROBE = Path(__file__).resolve().parent / "jobs" / "probe"
WAIT = 120


def distcomp(tmp_path: Path, uri: str | None, *flags: str, spec: str = "torch.yaml", wait: bool = True,
             env: Mapping[str, str] | None = None, timeout: float = WAIT,
             **inputs: object) -> subprocess.CompletedProcess[str] | subprocess.Popen[str]:
    """``distcomp run`` of the probe in ``tmp_path`` (run folder ``run``), tracking to ``uri``
    (else the default store); ``env`` adds to the environment; ``inputs`` are ``--input``s."""
    state = tmp_path / "state"
    state.mkdir(exist_ok=True)
    argv = [sys.executable, "-m", "distcomp", "run", str(PROBE / spec), "--quiet", "--grace", "3",
            "--run-dir", str(tmp_path / "run"), "--input", f"state_dir={state}", *flags]
    for name, value in inputs.items():
        argv += ["--input", f"{name}={value}"]
    full = clean_env(**({"MLFLOW_TRACKING_URI": uri} if uri else {}), **(env or {}))
    if wait:
        return subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, env=full, timeout=timeout)
    return subprocess.Popen(argv, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=full)


def only_run(uri: str, experiment: str = "tracking-probe") -> Any:
    client = MlflowClient(uri)
    exp = client.get_experiment_by_name(experiment)
    assert exp is not None, f"no experiment {experiment!r} in {uri}"
    runs = client.search_runs([exp.experiment_id])
    assert len(runs) == 1, [r.info.run_id for r in runs]
    return runs[0]


def artifacts(uri: str, run_id: str) -> set[str]:
    client = MlflowClient(uri)
    return {a.path for a in client.list_artifacts(run_id)} | {a.path for a in client.list_artifacts(run_id, "logs")}


def explain(proc: subprocess.CompletedProcess[str]) -> str:
    return f"exit {proc.returncode}\n--- stderr ---\n{proc.stderr[-4000:]}"
