"""``distcomp run --resume RUN_DIR``: the next attempt of a local job that ended without
succeeding (a preemption, a failure past its restarts, Ctrl-C), in the same run folder, with
the same checkpoint folder and MLflow run, its restart count one higher.

What the job was (its spec, inputs, outputs, variables, options) is a job record that every
local run writes before its ranks start, kept beside the core's job records
(``$XDG_STATE_HOME/distcomp/resume/HASH.json``, HASH the run folder's path; mode 600 in a
folder of mode 700): it may hold secret inputs and variables, which never go into the run
folder. How far the job got is the run folder's ``status.json``. Nothing of the first run's
command line is needed again.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

from ...errors import UsageError
from ...records import JobState, TrackingRef

if TYPE_CHECKING:
    from ...core.jobrecord import JobRecord
    from ...records import Plan

# what the record's options keep of the first run, for the resumed one
_KEPT = ("nodes", "nproc_per_node", "timeout", "max_restarts", "grace", "tracking", "experiment", "system_metrics",
         "system_metrics_interval", "hang_timeout")


@dataclass(frozen=True)
class Resume:
    """Where a resumed job starts: the attempts before it, the restarts those made after a
    failure, every earlier restart's cause, and the MLflow run it goes on in (None: untracked)."""

    first_attempt: int
    failures_used: int
    restarts: tuple[str, ...]
    tracking: TrackingRef | None


def write_resume_record(plan: "Plan", run_dir: Path, inputs: Mapping[str, str], outputs: Mapping[str, str],
                        env: Mapping[str, str], given: Mapping[str, Any], cwd: Path) -> None:
    """The record ``--resume`` reads, written before the ranks start (a spec with no file, a
    function's made in memory, has none: it is resumed by calling ``distcomp.run`` again);
    ``given``: the run's options (timeout, grace, tracking, experiment, system_metrics)."""
    from ...core.jobrecord import JobRecord, write_record

    spec = plan.spec
    if spec.source is None:
        return
    d = spec.distribution
    options: dict[str, Any] = {**{k: given.get(k) for k in _KEPT}, "run_dir": str(run_dir), "nodes": d.nodes,
                               "nproc_per_node": d.processes_per_node, "max_restarts": plan.max_restarts}
    record = JobRecord("run", str(spec.source), str(cwd), dict(inputs), dict(outputs), dict(env),
                       {k: v for k, v in options.items() if v is not None})
    path = record_path(run_dir)
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        write_record(path, record)
    except OSError:  # a full disk: the job runs; only --resume will say the record is missing
        pass


def record_path(run_dir: Path) -> Path:
    """Where the record of the job in ``run_dir`` is kept: with the core's, never in the run folder."""
    import hashlib

    from ...core.submission import jobs_dir

    return jobs_dir().parent / "resume" / (hashlib.sha256(str(run_dir.resolve()).encode("utf-8")).hexdigest()[:40] + ".json")


def resumable(run_dir: Path) -> tuple["JobRecord", Resume]:
    """The record of the job in ``run_dir`` and where its next attempt starts; a UsageError
    says why it cannot be resumed (no such run, still running, succeeded, no record)."""
    from ...core.jobrecord import read_record
    from . import _status

    status = _status.read(run_dir / _status.NAME)
    if not run_dir.is_dir() or status is None:
        raise UsageError(f"--resume {run_dir}: no run folder of a distcomp run there (no readable "
                         f"{_status.NAME}); give the RUN_DIR the run printed")
    try:
        state = JobState.parse(str(status.get("state")))
    except ValueError:
        raise UsageError(f"--resume {run_dir}: its {_status.NAME} says state {status.get('state')!r}") from None
    if state is JobState.SUCCEEDED:
        raise UsageError(f"--resume {run_dir}: the job succeeded; there is nothing to resume")
    if not state.terminal:
        raise UsageError(f"--resume {run_dir}: the job is {state} (or its supervisor died: `distcomp status "
                         f"{run_dir}` tells, and ends it); resume it once it has ended")
    path = record_path(run_dir)
    if not path.is_file():
        raise UsageError(f"--resume {run_dir}: distcomp kept no record of what that job ran ({path}: a spec with no "
                         "file, another user's or machine's run, or an older distcomp): run it again with its spec "
                         "and --run-dir to go on from its checkpoint")
    record = read_record(path)
    attempts = status.get("attempts")
    attempts = attempts if isinstance(attempts, int) and not isinstance(attempts, bool) and attempts > 0 else 1
    used = status.get("failures_used")
    used = used if isinstance(used, int) and not isinstance(used, bool) else 0
    earlier = status.get("restarts")
    causes = tuple(str(c) for c in earlier) if isinstance(earlier, list) else ()
    why = str(status.get("message") or "").split("\n")[0].split(":")[0].strip()
    cause = f"attempt {attempts}: {why or state}; resumed with --resume"
    run = status.get("mlflow")
    ref = (TrackingRef(str(run["run_id"]), str(run.get("tracking_uri") or ""), str(run.get("experiment_id") or ""))
           if isinstance(run, dict) and run.get("run_id") else None)
    return record, Resume(attempts, used, (*causes, cause), ref)


def kept_options(record: "JobRecord") -> dict[str, Any]:
    """The first run's options that the resumed one keeps (``distcomp.run``'s keywords)."""
    return {k: record.options[k] for k in _KEPT if k in record.options}
