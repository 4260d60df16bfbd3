"""The end of a job's run: its logs attached, its outcome and losses tagged, its status set.

Every step is retried as MLflow's client retries (``_retry``), for ``END_WAIT_S`` in all: then
the end waits on disk with what the ranks left (``_handover``). The status returned is the one
the store holds: the job's end (FINISHED, FAILED, KILLED) once the store accepted it, else
RUNNING, so nobody prints a state the store does not have. What the ranks could not deliver
(their reports in ``RUN_DIR/tracking``) is added up into ``status.json``, the problems (the
console) and the run's ``distcomp.undelivered`` tag.
"""

from __future__ import annotations

from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Mapping

from ..records import JobState
from ..base.redact import NONE, Masker
from ..mlstore._delivery import Counts, add_to_status, describe as describe_loss, read_reports
from ._extra import EXTRA_RUNS_TAG, describe as describe_extra, extra_runs
from ..mlstore._records import FAILURE_TAG, MAX_TAG_VALUE, MESSAGE_TAG, STATE_TAG, RunRef, StoreUnavailable, truncate
from ..mlstore._store import within
from ._handover import REPORTS_DIR, PendingEnd, conclude, delivering, end_wait, now_ms

if TYPE_CHECKING:
    from ..records import RunResult
    from ..mlstore._store import Store



def outcome_tags(result: "RunResult | None", state: str, error: str, root_cause: str = "") -> dict[str, str]:
    """The end of a job as tags, whichever target ran it: a FAILED run says why as FAILURE_TAG
    (the root cause: ``result``'s, else ``root_cause``, else ``error``, the target's reason)."""
    state = JobState.parse(str(state))
    tags = {STATE_TAG: str(state)}
    why = ""
    if result is not None:
        tags.update({"distcomp.exit_code": str(result.exit_code), "distcomp.attempts": str(result.attempts),
                     "distcomp.wall_s": f"{result.wall_s:.3f}"})
        if result.root_cause is not None:
            cause = result.root_cause
            why = cause.describe()
            tags.update({f"{FAILURE_TAG}.process": cause.name, f"{FAILURE_TAG}.node": str(cause.node),
                         f"{FAILURE_TAG}.exit_code": str(cause.returncode)})
    message = error or (result.message if result is not None else "")
    if message:
        tags[MESSAGE_TAG] = truncate(message, MAX_TAG_VALUE)
    why = why or root_cause
    if state.mlflow_status == "FAILED" and (why or message):
        tags[FAILURE_TAG] = truncate(why or message, MAX_TAG_VALUE)
    return tags


def undelivered(run_dir: Path, run: RunRef) -> tuple[Counts, list[str]]:
    """What the ranks could not deliver to ``run``, and the problems to tell (with the numbers)."""
    reports, problems = read_reports(run_dir / REPORTS_DIR, run.run_id)
    lost = sum((r.undelivered for r in reports), Counts())
    if lost.total:
        logged = sum((r.logged for r in reports), Counts())
        who = ", ".join(f"pid {r.pid} at {r.reason}" for r in reports)
        problems.append(f"MLflow run {run.run_id}: rank 0 could not deliver everything ({who}): "
                        f"{describe_loss(logged, lost)}; see status.json (tracking)")
    return lost, problems


def end(store: "Store", run: RunRef | str, result: "RunResult | None", log_dir: Path, error: str,
        state: str, started_ms: int = 0, masker: Masker = NONE, root_cause: str = "",
        more_tags: Mapping[str, str] | None = None) -> tuple[str, list[str]]:
    """Attach the logs, tag the outcome (``more_tags``: more tags of it) and the runs rank code made
    beside the job's (those made since ``started_ms``; 0: only those the ranks recorded), end the
    run; returns (the status the store holds, problems). Every tag passes the job's ``masker``
    (the failure's last lines). ``run``: its id alone when the store did not answer the look-up."""
    state = JobState.parse(str(result.state if result is not None else state))
    status = state.mlflow_status
    tags = masker.data({**(more_tags or {}), **outcome_tags(result, state, error, root_cause)})
    run_dir = log_dir.parent
    store = within(store, end_wait())  # minutes of retries would hold the job's end: its rest waits on disk
    given = run if isinstance(run, RunRef) else None
    run = given or RunRef(str(run), "", "")
    lost, problems = undelivered(run_dir, run)
    if lost.total:
        tags["distcomp.undelivered"] = str(lost.total)
        tags.update({f"distcomp.undelivered.{k}": str(v) for k, v in lost.as_dict().items()})
    extra, more = extra_runs(store, run, run_dir / REPORTS_DIR, started_ms if given else 0)
    problems += more
    if extra:
        warning = describe_extra(run, extra)
        problems.append(warning)
        tags[EXTRA_RUNS_TAG] = truncate(masker.text(warning), MAX_TAG_VALUE)
    status_json = run_dir / "status.json"
    section: dict[str, object] = {"run_id": run.run_id, "undelivered": lost.as_dict()}
    add_to_status(status_json, "tracking", section)  # before it is attached: the copy in MLflow says it too
    # not while `distcomp status` delivers an earlier end; a folder that is no run folder has none
    with delivering(run_dir / REPORTS_DIR) if status_json.is_file() else nullcontext():
        return conclude(store, given, run_dir, PendingEnd(run.run_id, store.uri, status, now_ms(), tags), problems)


def end_run(uri: str, run_id: str, state: JobState, *, message: str = "", cause: str = "", log_dir: Path,
            masker: Masker = NONE, started_ms: int = 0, more_tags: Mapping[str, str] | None = None,
            environ: Mapping[str, str] | None = None, known: RunRef | None = None) -> tuple[str, list[str]]:
    """End the run ``run_id`` in ``uri`` with a job's outcome, from any process: ``end`` on the
    store, opened here. ``known``: the run as it was made (not looked up again: a store away now
    is waited for as the end's steps wait). Raises TrackingError when the store cannot be opened
    or has no such run."""
    from ..mlstore._store import open_store

    opened = open_store(uri, environ)
    if known is not None and hasattr(opened, "answered"):  # it made the run: an outage now is waited
        opened.answered = True  # for as the launcher's own store waits, not only briefly (``_rest``)
    store = within(opened, end_wait(environ))
    run: RunRef | str = known if known is not None and known.run_id == run_id else run_id
    try:
        run = run if isinstance(run, RunRef) else store.get_run(run_id)
    except StoreUnavailable:  # its end waits in the run folder (or the problems say how to end it by hand)
        run = run_id
    return end(store, run, None, log_dir, message, str(state), started_ms, masker, cause, more_tags)


def ended_state(store: "Store", run_id: str) -> str:
    """The job state a run's end was tagged with (``distcomp.state``), or "" while nobody ended it."""
    return store.run_data(run_id).tags.get(STATE_TAG, "")
