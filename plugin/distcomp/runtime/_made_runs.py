"""The MLflow runs a rank's code made itself, told to the launcher.

A job has one MLflow run, but rank code may still make another (``MlflowClient().create_run``,
a logger given its own experiment). distcomp's MLflow hook (``_mlflow_hook``) tags such a run
with the job's run id and appends a line about it to ``$DISTCOMP_TRACKING_DIR/runs-PID.jsonl``;
at the end of the job the launcher reads those lines and says which runs were made, and where.
Import-light: the stdlib only.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

JOB_RUN_TAG = "distcomp.job_run_id"  # on a run made inside a job: that job's run
RANK_TAG = "distcomp.rank"  # ... and the rank that made it
PARENT_TAG = "mlflow.parentRunId"  # MLflow's own: a nested run's parent
_PATTERN = "runs-*.jsonl"


@dataclass(frozen=True)
class MadeRun:
    """One run a rank's code created during the job."""

    run_id: str
    name: str
    experiment_id: str
    parent: str = ""  # its mlflow.parentRunId: a child of the job's run is no second run
    rank: int | None = None  # None: found in the store, no rank told of it
    job_run_id: str = ""  # the job's run, when the run was made (a run folder may serve several jobs)
    store: str = ""  # the tracking URI, when not the job's (``mlflow.set_tracking_uri`` in the script)

    def to_json(self) -> dict[str, object]:
        return {"run_id": self.run_id, "name": self.name, "experiment_id": self.experiment_id,
                "parent": self.parent, "rank": self.rank, "job_run_id": self.job_run_id, "store": self.store}


def record(folder: Path, run: MadeRun) -> None:
    """Append ``run`` to this process's file in ``folder`` (one line each: a reader never needs
    a lock, and a line cut by a crash is skipped)."""
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / f"runs-{os.getpid()}.jsonl", "a", encoding="utf-8") as f:
        f.write(json.dumps(run.to_json()) + "\n")


def read(folder: Path, job_run_id: str) -> list[MadeRun]:
    """The runs the ranks of the job whose run is ``job_run_id`` recorded in ``folder``, in file
    order; unreadable lines are skipped."""
    runs = []
    for path in sorted(folder.glob(_PATTERN)) if folder.is_dir() else []:
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except OSError:
            continue
        for line in lines:
            try:
                data = json.loads(line)
                if data.get("job_run_id") != job_run_id:
                    continue
                rank = data.get("rank")
                runs.append(MadeRun(str(data["run_id"]), str(data.get("name") or ""),
                                    str(data.get("experiment_id") or ""), str(data.get("parent") or ""),
                                    int(rank) if rank is not None else None, job_run_id,
                                    str(data.get("store") or "")))
            except (ValueError, KeyError, TypeError, AttributeError):
                continue
    return runs
