"""The last writes of a job's run, now or later: what the ranks left waiting, the logs, the
outcome's tags, the end (its status and time).

The end of a job waits for a store that does not answer ``END_WAIT_S`` at most. Then, for a job
with a run folder, the end itself waits on disk beside the ranks' pending points
(``RUN_DIR/tracking/pending-end.json``: status, end time, tags), and ``distcomp status RUN_DIR``
or ``distcomp reap RUN_DIR`` delivers both once the store answers (``deliver_later``): the run
ends with the job's real state and end time, and nothing waits any more.
"""

from __future__ import annotations

import json
import os
import shlex
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Mapping

from ..base.files import write_atomic
from ..mlstore import _pending
from ..mlstore._delivery import Counts, add_to_status, describe_waiting
from ..mlstore._records import RunRef, StoreUnavailable, TrackingError

if TYPE_CHECKING:
    from ..mlstore._store import Store

END_WAIT_S = 10.0  # how long the end of a job waits for a store that does not answer: the rest waits on disk
REPORTS_DIR = "tracking"  # in the run folder: the ranks' delivery reports, backlog and pending files
PENDING_END = "pending-end.json"
LOCK = ".delivering"  # held while one process delivers: a second one leaves it to the first


@dataclass(frozen=True)
class PendingEnd:
    """The end of a job's run, as the store should get it."""

    run_id: str
    uri: str
    status: str  # FINISHED, FAILED, KILLED
    end_ms: int
    tags: Mapping[str, str] = field(default_factory=dict)  # masked already

    @classmethod
    def read(cls, path: Path) -> "PendingEnd":
        """Raises OSError, ValueError (a file that is not one of ours)."""
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict) or not isinstance(data.get("tags"), dict):
            raise ValueError(f"{path}: not a pending end")
        return cls(str(data["run_id"]), str(data["uri"]), str(data["status"]), int(data["end_ms"]),
                   {str(k): str(v) for k, v in data["tags"].items()})


def end_wait(environ: Mapping[str, str] | None = None) -> float:
    """``END_WAIT_S``, or ``DISTCOMP_END_WAIT_S`` where set to a number of seconds."""
    text = (os.environ if environ is None else environ).get("DISTCOMP_END_WAIT_S", "")
    try:
        return max(0.0, float(text)) if text.strip() else END_WAIT_S
    except ValueError:
        return END_WAIT_S


def now_ms() -> int:
    return int(time.time() * 1000)


@contextmanager
def delivering(folder: Path, wait: bool = True) -> Iterator[bool]:
    """Hold ``folder``'s delivery lock (True), or, without ``wait``, say False when another
    process holds it; True where the lock cannot be made (a read-only folder: nothing to race)."""
    try:
        import fcntl

        folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(folder / LOCK, os.O_RDWR | os.O_CREAT, 0o600)
    except (ImportError, OSError):
        yield True
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(fd)  # releases the lock


def conclude(store: "Store", run: RunRef | None, run_dir: Path, end: PendingEnd,
             said: list[str] | None = None) -> tuple[str, list[str]]:
    """Deliver what waits, attach the logs, tag the outcome and end the run (``run``: None to look
    it up first); returns the status the store holds and the problems (after ``said``, the
    caller's). When the store stops answering, a run folder (one with status.json) keeps the end
    for later and the problems say how many points wait and which command delivers them;
    elsewhere they say how to end the run by hand."""
    folder, status_json = run_dir / REPORTS_DIR, run_dir / "status.json"
    handover = status_json.is_file()
    problems: list[str] = list(said or [])
    tags = dict(end.tags)
    held = "RUNNING"
    step = "reach the store"
    ref = RunRef(end.run_id, "", "")
    try:
        ref = run = run if run is not None else store.get_run(end.run_id)
        step = "deliver what the ranks left waiting"
        _delivered, refused, more = _pending.deliver(store, run, folder)
        problems += more
        if refused.total:  # refused for good: lost, and said so on the run as the ranks' losses are
            tags.update(_lost_tags(tags, refused))
        files = sorted((p, f"logs/{p.name}") for p in (run_dir / "logs").glob("*.log") if p.is_file())
        if status_json.is_file():
            files.append((status_json, "status.json"))
        for step, call in (("attach the logs", lambda: store.upload(run, files)),
                           ("tag the outcome", lambda: problems.extend(store.log(run.run_id, tags))),
                           (f"mark it {end.status}", lambda: store.terminate(run.run_id, end.status, end.end_ms))):
            try:
                call()
            except StoreUnavailable:
                raise
            except (TrackingError, OSError) as exc:
                problems.append(f"MLflow run {run.run_id}: could not {step}: {exc}")
            else:
                held = end.status if step.startswith("mark it") else held
    except StoreUnavailable as exc:
        problems.append(_left(ref, run_dir, end, step, exc) if handover else _by_hand(store, ref, end, step, exc))
        if handover:
            try:
                kept = asdict(replace(end, tags=tags))  # with what was refused meanwhile
                write_atomic(folder / PENDING_END, json.dumps(kept, indent=2) + "\n", mode=0o600)
            except OSError as err:
                problems.append(f"MLflow run {ref.run_id}: could not keep its end in {folder}: {err.strerror or err}")
    else:
        if held != end.status:
            problems.append(_by_hand(store, ref, end, f"mark it {end.status}", None))
        (folder / PENDING_END).unlink(missing_ok=True)
    waiting = _pending.count(folder)
    section = {**_section(status_json), "run_id": ref.run_id, "run_status": held, "problems": problems,
               "waiting": waiting.as_dict()}
    add_to_status(status_json, "tracking", section)
    return held, problems


def deliver_later(run_dir: Path, environ: Mapping[str, str] | None = None) -> tuple[str, list[str]] | None:
    """``distcomp status|reap RUN_DIR``: deliver what the job's end left waiting, and end its run;
    (the status the store holds, problems), or None when nothing waits (or another process is
    delivering it now)."""
    folder = run_dir / REPORTS_DIR
    path = folder / PENDING_END
    if not path.is_file():
        return None
    with delivering(folder, wait=False) as mine:
        if not mine or not path.is_file():
            return None
        try:
            end = PendingEnd.read(path)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            return "RUNNING", [f"{path}: cannot be read ({exc}); the run it names is left as it is"]
        from ..mlstore._store import open_store, within

        try:
            store = within(open_store(end.uri, environ), end_wait(environ))
        except TrackingError as exc:
            return "RUNNING", [f"MLflow run {end.run_id} in {end.uri}: could not end it: {exc}"]
        return conclude(store, None, run_dir, end)


def _section(status_json: Path) -> dict[str, Any]:
    try:
        found = json.loads(status_json.read_text(encoding="utf-8")).get("tracking")
    except (OSError, ValueError, AttributeError):
        return {}
    return found if isinstance(found, dict) else {}


def _lost_tags(tags: Mapping[str, str], more: Counts) -> dict[str, str]:
    def was(key: str) -> int:
        text = tags.get(key, "0")
        return int(text) if text.isdigit() else 0

    out = {"distcomp.undelivered": str(was("distcomp.undelivered") + more.total)}
    out.update({f"distcomp.undelivered.{k}": str(was(f"distcomp.undelivered.{k}") + v) for k, v in more.as_dict().items()})
    return out


def _left(run: RunRef, run_dir: Path, end: PendingEnd, step: str, exc: BaseException) -> str:
    """The console's word on a run whose end waits on disk: how much waits, and what delivers it."""
    waiting = _pending.count(run_dir / REPORTS_DIR)
    what = f"{describe_waiting(waiting)} and the job's end ({end.status})" if waiting.total else \
        f"the job's end ({end.status})"
    folder = shlex.quote(str(run_dir))
    return (f"MLflow run {run.run_id} is left RUNNING: could not {step}: {exc}; {what} "
            f"wait{'' if waiting.total else 's'} in {run_dir / REPORTS_DIR}: `distcomp status {folder}` (or "
            f"`distcomp reap {folder}`) delivers {'them' if waiting.total else 'it'} and ends the run once the "
            "store answers")


def _by_hand(store: "Store", run: RunRef, end: PendingEnd, step: str, exc: BaseException | None) -> str:
    why = f"could not {step}: {exc}; " if exc is not None else ""
    return (f"MLflow run {run.run_id} is left RUNNING; {why}once the store answers, end it with: python -c "
            f"\"import mlflow; mlflow.MlflowClient('{store.uri}').set_terminated('{run.run_id}', "
            f"'{end.status}', {end.end_ms})\"")
