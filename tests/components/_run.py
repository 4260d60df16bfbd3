"""Run a shipped component with ``distcomp run`` as a user does (a real subprocess, 2 local
ranks, tracking into a test SQLite store) and read back what it left: outputs, rank logs and
the job's one MLflow run."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mlflow import MlflowClient

from ..launchers.conftest import JobRun, _explain, clean_env

COMPONENTS = Path(__file__).resolve().parents[2] / "components"
NAMES = ("deepspeed-train", "mpi-allreduce-bench", "pytorch-ddp-train", "tf-multiworker-train")


@dataclass
class ComponentRun(JobRun):
    """A finished job (``log("rank0")``, ``status``) with the MLflow store it tracked into."""

    uri: str = ""

    def output(self, name: str) -> Path:
        return Path(self.status["outputs"][name])

    @property
    def client(self) -> "MlflowClient":
        from mlflow import MlflowClient  # here: collecting the suite should not import mlflow (~2 s)

        return MlflowClient(self.uri)

    def mlflow_run(self) -> Any:
        """The job's one MLflow run (experiment: the run's folder name, unique per test)."""
        experiment = self.client.get_experiment_by_name(self.run_dir.name)
        assert experiment is not None, f"no experiment {self.run_dir.name!r} in {self.uri}"
        runs = self.client.search_runs([experiment.experiment_id])
        assert len(runs) == 1, [r.info.run_id for r in runs]
        return runs[0]

    def history(self, run_id: str, key: str) -> list[tuple[int, float]]:
        """(step, value) of every point of a metric, by step."""
        return sorted((m.step, m.value) for m in self.client.get_metric_history(run_id, key))

    def artifacts(self, run_id: str, folder: str | None = None) -> set[str]:
        return {a.path for a in self.client.list_artifacts(run_id, folder)}


def run_component(name: str, tmp_path: Path, uri: str, *, label: str = "run", timeout: float = 240,
                  **inputs: object) -> ComponentRun:
    """``distcomp run components/NAME/component.yaml`` on its 2 local ranks; asserts exit 0
    and a FINISHED MLflow run, in the experiment ``label`` (also the run folder's name)."""
    run_dir = tmp_path / label
    argv = [sys.executable, "-m", "distcomp", "run", str(COMPONENTS / name / "component.yaml"), "--quiet",
            "--run-dir", str(run_dir), "--experiment", label, "--timeout", str(timeout), "--grace", "3"]
    for key, value in inputs.items():
        argv += ["--input", f"{key}={value}"]
    proc = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=timeout + 60,
                          env={**clean_env(), "MLFLOW_TRACKING_URI": uri})
    run = ComponentRun(proc, run_dir, world=2, uri=uri)
    assert proc.returncode == 0, _explain(run)
    assert "Traceback" not in proc.stderr, _explain(run)
    run.status = status = json.loads((run_dir / "status.json").read_text(encoding="utf-8"))
    assert (status["state"], status["exit_code"], status["failures"]) == ("succeeded", 0, []), status
    mlflow_run = run.mlflow_run()
    assert mlflow_run.info.status == "FINISHED", mlflow_run.info
    tags = mlflow_run.data.tags
    assert tags["distcomp.component"] == name and tags["distcomp.world_size"] == "2", tags
    return run


def steps_only_once(points: list[tuple[int, float]]) -> list[int]:
    """The steps of a metric's history; one point per step means one rank logged it."""
    steps = [s for s, _ in points]
    assert len(steps) == len(set(steps)), f"a step was logged twice (by two ranks?): {points}"
    return steps
