"""Runs the job's rank code made beside the job's one run, found at the job's end.

Two sources: what distcomp's MLflow hook recorded in the ranks (``runtime._made_runs``: any
experiment, with the rank), and a search of the job's experiment for runs started during the
job (a process without the hook: another interpreter, ``python -I``). A child of the job's run
(``start_run(nested=True)``) is the job's own; the run of another job (its own run, or one made
by its ranks, both tagged) is not this job's.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ..runtime._made_runs import JOB_RUN_TAG, PARENT_TAG, RANK_TAG, MadeRun, read
from ..mlstore._records import RunRef, TrackingError

if TYPE_CHECKING:
    from ..mlstore._store import Store

JOB_TAG = "distcomp.job_id"  # on every job's own run (job_tags)
EXTRA_RUNS_TAG = "distcomp.extra_runs"  # on the job's run: the warning, when rank code made runs


def extra_runs(store: "Store", run: RunRef, reports: Path, started_ms: int) -> tuple[list[MadeRun], list[str]]:
    """The outermost runs made during the job that are not the job's run nor its children, and
    the problems met looking (the store did not answer the search)."""
    found = {m.run_id: m for m in read(reports, run.run_id)}
    problems = []
    if started_ms:
        try:
            stored = store.runs_since(run.experiment_id, started_ms)
        except (TrackingError, OSError) as exc:
            stored = []
            problems.append(f"MLflow run {run.run_id}: could not look for other runs made during the job: {exc}")
        for other in stored:
            owner = other.tags.get(JOB_RUN_TAG, "")
            if other.run_id == run.run_id or other.run_id in found or JOB_TAG in other.tags or \
                    (owner and owner != run.run_id):
                continue
            rank = other.tags.get(RANK_TAG, "")
            found[other.run_id] = MadeRun(other.run_id, other.name, other.experiment_id, other.tags.get(PARENT_TAG, ""),
                                          int(rank) if owner and rank.isdigit() else None, run.run_id)
    ours = {run.run_id}
    grew = True
    while grew:  # nested runs, to any depth
        grew = False
        for made in found.values():
            if made.run_id not in ours and made.parent in ours:
                ours.add(made.run_id)
                grew = True
    extra = {r for r in found if r not in ours}
    return [m for m in found.values() if m.run_id in extra and m.parent not in extra], problems


def describe(run: RunRef, extra: list[MadeRun]) -> str:
    """The warning: which runs, made where, and how to keep their metrics in the job's run."""
    n = len(extra)
    def where(m: MadeRun) -> str:
        if m.store:
            return f"experiment {m.experiment_id} of {m.store}, the script's own store"
        return f"experiment {m.experiment_id}" if m.experiment_id != run.experiment_id else "the job's experiment"

    listed = ", ".join(f"{m.run_id} {m.name!r} (" + (f"rank {m.rank}, " if m.rank is not None else "") + where(m) +
                       ("" if m.rank is not None else "; found there, made during the job") + ")" for m in extra)
    return (f"rank code created {n} more MLflow run{'s' if n != 1 else ''} (ID, name): {listed}; what "
            f"{'it' if n == 1 else 'they'} logged is not in the job's run {run.run_id}. Pass "
            "run_id=os.environ['DISTCOMP_MLFLOW_RUN_ID'] where it is made (MlflowClient's calls, Lightning's "
            "MLFlowLogger(run_id=...)), or use mlflow.start_run(), which resumes the job's run")
