"""Run the real ``mlflow`` and ``distcomp`` commands the way a user does, and read what they
left in the store."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from mlflow import MlflowClient

from .._jobs import clean_env  # noqa: F401  (re-exported for the tests)

BIN = Path(sys.executable).parent
MLFLOW = BIN / "mlflow"
PROBE = Path(__file__).resolve().parent / "jobs" / "probe" / "component.yaml"
WAIT = 180  # seconds one `mlflow run` may take (mlflow's import, torch's, two ranks)


def user_env(uri: str, **extra: str) -> dict[str, str]:
    """A shell with the virtualenv active (``distcomp`` on PATH) and the test's store."""
    return clean_env(MLFLOW_TRACKING_URI=uri, PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", **extra)


def mlflow_run(project: Path, uri: str, cwd: Path, *params: str, backend: str | None = "distcomp",
               config: str | None = '{"nproc_per_node": 2}') -> subprocess.CompletedProcess[str]:
    """``mlflow run PROJECT [-b BACKEND -c CONFIG] --env-manager local -P ...``."""
    argv = [str(MLFLOW), "run", str(project), "--env-manager", "local", "--experiment-name", "probe"]
    if backend:
        argv += ["-b", backend]
    if config:
        argv += ["-c", config]
    for p in params:
        argv += ["-P", p]
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, env=user_env(uri), timeout=WAIT)


def distcomp(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "distcomp", *args], cwd=cwd, capture_output=True, text=True,
                          env=env or clean_env(), timeout=WAIT)


def all_runs(uri: str) -> list[Any]:
    """Every run in the store, whatever its experiment."""
    client = MlflowClient(uri)
    return client.search_runs([e.experiment_id for e in client.search_experiments()])


def only_run(uri: str) -> Any:
    runs = all_runs(uri)
    assert len(runs) == 1, [(r.info.run_id, r.info.experiment_id, r.data.tags.get("mlflow.source.type"))
                            for r in runs]
    return runs[0]


def artifact_text(uri: str, run_id: str, path: str, dst: Path) -> str:
    local = MlflowClient(uri).download_artifacts(run_id, path, str(dst))
    return Path(local).read_text(encoding="utf-8", errors="replace")


def explain(proc: subprocess.CompletedProcess[str]) -> str:
    return f"exit {proc.returncode}\n--- stderr ---\n{proc.stderr[-5000:]}\n--- stdout ---\n{proc.stdout[-3000:]}"
