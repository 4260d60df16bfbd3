"""One MLflow run per job, whatever the training script does with MLflow.

Installed into every rank's Python by ``_site/sitecustomize.py`` (on the rank's PYTHONPATH
only when the job is tracked), and only when the script imports the modules patched here:
a rank that never imports mlflow pays for none of it.

MLflow's fluent API resumes the run named by ``MLFLOW_RUN_ID`` once, then deletes the variable:
a second ``with mlflow.start_run():`` (HF Trainer's ``train()`` then ``evaluate()``) makes a
new run, and every rank makes its own. Patched here:

- a top-level ``mlflow.start_run()`` (no ``run_id``) resumes the job's run, on every rank,
  keeping the run's name; ``start_run(nested=True)`` with no active run makes a child of it;
- ending such a run (a ``with`` block's end, ``mlflow.end_run()``, Lightning's ``finalize``)
  leaves the job's run RUNNING: the launcher ends it with the job's state;
- on ranks other than the main one, nothing is written to the job's run and no run is made
  by ``start_run``: MLflow's convention under DDP is that rank 0 logs (as ``distcomp.runtime``
  does); N copies of each metric in one run would interleave, and a param logged with another
  value by another rank (its rank, its seed) would fail that rank;
- an autolog (``mlflow.tensorflow.autolog()``, ``mlflow.autolog()``) logs its model on the main
  rank only: on the others its ``log_models`` is off, so the run holds one ``model`` (a
  LoggedModel is made before ``fit`` and linked to the run, which the write guard cannot stop);
- Lightning's ``MLFlowLogger`` without a ``run_id`` logs into the job's run (its
  ``experiment_name`` and ``run_name`` then name nothing; the main rank says where it went);
- a run rank code still makes itself (``MlflowClient().create_run``) is tagged with the job's
  run and recorded for the launcher, which tells the user at the end (``_made_runs``);
- every param and tag value, and a logged text or dict, is masked by the one rule: the values
  of the rank's secret-named environment variables are written ``***`` (``_masking``).
"""

from __future__ import annotations

import functools
import inspect
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

from ._made_runs import JOB_RUN_TAG, PARENT_TAG, RANK_TAG, MadeRun, record

RUN_ENV = "DISTCOMP_MLFLOW_RUN_ID"  # the job's run; MLflow deletes MLFLOW_RUN_ID, not this one
URI_ENV = "DISTCOMP_MLFLOW_TRACKING_URI"  # its store; mlflow.set_tracking_uri() overwrites MLFLOW_TRACKING_URI
REPORTS_ENV = "DISTCOMP_TRACKING_DIR"  # mlstore/_delivery.REPORTS_ENV, not imported: ranks stay light
PATCHED = "__distcomp_patched__"

# MlflowClient methods that write to the run given as their first argument
WRITES = ("log_metric", "log_param", "set_tag", "delete_tag", "update_run", "log_batch", "log_inputs",
          "log_outputs", "log_artifact", "log_artifacts", "log_text", "log_dict", "log_stream", "log_figure",
          "log_image", "log_table")
LIGHTNING = ("lightning.pytorch.loggers.mlflow", "pytorch_lightning.loggers.mlflow")
AUTOLOGGING = "mlflow.utils.autologging_utils"
MODULES = ("mlflow.tracking.client", "mlflow.tracking.fluent", AUTOLOGGING, *LIGHTNING)


def job_run_id() -> str | None:
    if os.environ.get("DISTCOMP_TRACKING") == "off":
        return None
    return os.environ.get(RUN_ENV) or None


def _elsewhere(uri: str | None) -> bool:
    """True when the script logs to another store than the job's (``set_tracking_uri``, a
    logger's ``tracking_uri``): the job's run is not there, so MLflow's own way applies. The
    same store spelled otherwise (``http://host:port/``, a relative SQLite path) is the job's."""
    if uri is None:
        return False
    job = os.environ.get(URI_ENV, os.environ.get("MLFLOW_TRACKING_URI"))
    if job is None:
        return True
    from ..mlstore._uri import normalise  # only once mlflow is imported: its cost is nothing beside it

    return normalise(str(uri)) != normalise(job)


@functools.cache
def _rank() -> tuple[int, bool]:
    """(rank, whether it is the main one); a rank whose launcher variables are malformed
    counts as the main one: its logging is then MLflow's as usual."""
    from ._rankinfo import RankInfoError, rank_info

    try:
        info = rank_info()
    except RankInfoError:
        return 0, True
    return info.rank, info.is_main


def patch(module: ModuleType) -> None:
    """Patch ``module`` (one of MODULES) right after it was executed; once."""
    if getattr(module, PATCHED, False) or job_run_id() is None:
        return
    name = module.__name__
    if name == "mlflow.tracking.client":
        _patch_client(module.MlflowClient)
    elif name == "mlflow.tracking.fluent":
        _patch_fluent(module)
    elif name == AUTOLOGGING:
        _patch_autologging(module)
    elif name in LIGHTNING:
        _patch_lightning(module.MLFlowLogger)
    setattr(module, PATCHED, True)


def _heartbeat(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """``runtime.progress`` at the step of an MLflow metric call (``log_metric``'s ``step``, the
    largest of a ``log_batch``'s points), with its metric (a batch's first); a step it cannot
    read keeps the last one."""
    from ._progress import beat

    step: Any = None
    pair: tuple[Any, Any] = (None, None)  # the metric's (key, value): its first, for a batch
    if name == "log_metric":
        step = kwargs.get("step", args[4] if len(args) > 4 else None)
        key = kwargs.get("key", args[1] if len(args) > 1 else None)
        pair = (key, kwargs.get("value", args[2] if len(args) > 2 else None))
    else:
        metrics = list(kwargs.get("metrics") or (args[1] if len(args) > 1 else ()) or ())
        steps = [getattr(m, "step", None) for m in metrics]
        step = max((s for s in steps if isinstance(s, int)), default=None)
        if metrics:
            pair = (getattr(metrics[0], "key", None), getattr(metrics[0], "value", None))
    metric = (pair[0], float(pair[1])) if isinstance(pair[0], str) and isinstance(pair[1], (int, float)) \
        and not isinstance(pair[1], bool) else None
    beat(step if isinstance(step, int) and not isinstance(step, bool) else None, metric)


def _run_of(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    return args[0] if args else kwargs.get("run_id")


def _patch_client(client: type) -> None:
    def guard_end(original: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(original)
        def set_terminated(self: Any, *args: Any, **kwargs: Any) -> Any:
            if _run_of(args, kwargs) == job_run_id():  # the launcher ends it, with the job's state
                _send_async(self)
                return None
            return original(self, *args, **kwargs)
        return set_terminated

    def main_rank_only(original: Callable[..., Any]) -> Callable[..., Any]:
        metric = original.__name__ in ("log_metric", "log_batch")

        @functools.wraps(original)
        def write(self: Any, *args: Any, **kwargs: Any) -> Any:
            if metric:  # every rank's metric call is its heartbeat, logged or not
                _heartbeat(original.__name__, args, kwargs)
            if _run_of(args, kwargs) == job_run_id() and not _rank()[1]:
                if kwargs.get("synchronous") is False:  # the caller may wait() on what it gets
                    from mlflow.utils.async_logging.run_operations import RunOperations

                    return RunOperations([])
                return None
            return original(self, *args, **kwargs)
        return write

    def tell_made(original: Callable[..., Any]) -> Callable[..., Any]:
        signature = inspect.signature(original)

        @functools.wraps(original)
        def create_run(self: Any, *args: Any, **kwargs: Any) -> Any:
            job = job_run_id()
            bound = signature.bind(self, *args, **kwargs)
            rank = _rank()[0]
            tags = dict(bound.arguments.get("tags") or {})
            tags.setdefault(JOB_RUN_TAG, job)
            tags.setdefault(RANK_TAG, str(rank))
            bound.arguments["tags"] = tags
            run = original(*bound.args, **bound.kwargs)
            folder = os.environ.get(REPORTS_ENV)
            if job and folder:
                uri = getattr(getattr(self, "_tracking_client", None), "tracking_uri", None)
                try:
                    record(Path(folder), MadeRun(run.info.run_id, run.info.run_name or "",
                                                 str(run.info.experiment_id), str(tags.get(PARENT_TAG) or ""), rank,
                                                 job, str(uri) if _elsewhere(uri) else ""))
                except OSError as exc:  # the run folder is gone or full: the end-of-job search still looks
                    print(f"distcomp: cannot record MLflow run {run.info.run_id} in {folder}: {exc}", file=sys.stderr)
            return run
        return create_run

    client.set_terminated = guard_end(client.set_terminated)  # type: ignore[attr-defined]
    for name in WRITES:
        if hasattr(client, name):
            setattr(client, name, main_rank_only(getattr(client, name)))
    for name in MASKED:
        if hasattr(client, name):
            setattr(client, name, _masked(getattr(client, name)))
    client.create_run = tell_made(client.create_run)  # type: ignore[attr-defined]


# MlflowClient methods whose values are masked (``_masking``): the fluent API's log_param(s),
# set_tag(s), log_text and log_dict all come through these
MASKED = ("log_param", "set_tag", "log_batch", "log_text", "log_dict")


def _masked(original: Callable[..., Any]) -> Callable[..., Any]:
    """``original`` with every param and tag value, and a logged text or dict, masked."""
    from . import _masking

    signature = inspect.signature(original)

    @functools.wraps(original)
    def write(*args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(*args, **kwargs)
        given = bound.arguments
        if "value" in given:  # log_param, set_tag: MLflow stores str(value)
            given["value"] = _masking.text(str(given["value"]))
        for key in ("params", "tags"):  # log_batch: Param and RunTag records
            if given.get(key):
                given[key] = [type(e)(e.key, _masking.text(str(e.value))) for e in given[key]]
        if isinstance(given.get("text"), str):
            given["text"] = _masking.text(given["text"])
        if "dictionary" in given:
            given["dictionary"] = _masking.data(given["dictionary"])
        return original(*bound.args, **bound.kwargs)
    return write


def _send_async(client: Any) -> None:
    """What ``set_terminated`` does before it ends a run: send what MLflow's async logging holds
    (``log_metrics(synchronous=False)``, as Keras autologging logs). Left to the exit, it is lost:
    Python shuts the queue's thread pools before MLflow's exit handler drains it."""
    store = getattr(getattr(client, "_tracking_client", None), "store", None)
    shut_down = getattr(store, "shut_down_async_logging", None)
    if shut_down is not None:
        shut_down()


def _patch_fluent(fluent: ModuleType) -> None:
    original = fluent.start_run
    signature = inspect.signature(original)

    @functools.wraps(original)
    def start_run(*args: Any, **kwargs: Any) -> Any:
        job = job_run_id()
        bound = signature.bind(*args, **kwargs)
        given = bound.arguments
        named = os.environ.get("MLFLOW_RUN_ID")
        if job is None or given.get("run_id") or given.get("parent_run_id") or (named and named != job):
            return original(*bound.args, **bound.kwargs)  # the script names its run: MLflow's way
        # as MLflow does at its first start_run; else a nested start_run would resume the job's run,
        # and one in another store would look for the job's run there
        os.environ.pop("MLFLOW_RUN_ID", None)
        if _elsewhere(_tracking_uri()):  # the script's own store: its runs are its own (and told)
            return original(*bound.args, **bound.kwargs)
        active = fluent.active_run() is not None
        nested = bool(given.get("nested"))
        if active and not nested:
            return original(*bound.args, **bound.kwargs)  # MLflow's "already active" error, on every rank
        if _rank()[1] and nested:
            if not active:
                given["parent_run_id"] = job  # the job's run is the outermost run
            return original(*bound.args, **bound.kwargs)
        # resume the job's run: its name stays the job's; on other ranks nothing is written
        given.update(run_id=job, run_name=None)
        if not _rank()[1]:
            given.update(tags=None, description=None, log_system_metrics=False)
        # mlflow.set_experiment("x") makes MLflow refuse to resume a run of another experiment; the
        # job's run wins (its experiment is the one distcomp was given)
        experiment = getattr(fluent, "_active_experiment_id", None)
        setattr(fluent, "_active_experiment_id", None)
        try:
            return original(*bound.args, **bound.kwargs)
        finally:
            setattr(fluent, "_active_experiment_id", experiment)

    fluent.start_run = start_run  # type: ignore[attr-defined]


def _patch_autologging(module: ModuleType) -> None:
    """Every flavor's ``autolog`` is made by ``autologging_integration(name)``: wrap what it
    makes, so that on ranks other than the main one it runs with ``log_models=False``."""
    original = module.autologging_integration

    @functools.wraps(original)
    def autologging_integration(name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        decorate = original(name)

        def wrap(autolog: Callable[..., Any]) -> Callable[..., Any]:
            made = decorate(autolog)
            if "log_models" not in inspect.signature(autolog).parameters:
                return made
            signature = inspect.signature(made)

            @functools.wraps(made)
            def main_rank_models(*args: Any, **kwargs: Any) -> Any:
                if job_run_id() is not None and not _rank()[1]:
                    bound = signature.bind(*args, **kwargs)
                    bound.arguments["log_models"] = False
                    return made(*bound.args, **bound.kwargs)
                return made(*args, **kwargs)
            return main_rank_models
        return wrap

    module.autologging_integration = autologging_integration  # type: ignore[attr-defined]


def _tracking_uri() -> str:
    import mlflow.tracking

    return str(mlflow.tracking.get_tracking_uri())


def _patch_lightning(logger: type) -> None:
    original = logger.__init__  # type: ignore[misc]
    signature = inspect.signature(original)
    if "run_id" not in signature.parameters:
        return

    @functools.wraps(original)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        bound = signature.bind(self, *args, **kwargs)
        uri = bound.arguments.get("tracking_uri", signature.parameters["tracking_uri"].default
                                  if "tracking_uri" in signature.parameters else None)
        if not bound.arguments.get("run_id") and not _elsewhere(uri):
            bound.arguments["run_id"] = job_run_id()  # its default makes a run in its own experiment
            if _rank()[1]:  # its experiment_name and run_name now name nothing: say where the metrics go
                asked = ", ".join(f"{k}={bound.arguments[k]!r}" for k in ("experiment_name", "run_name")
                                  if bound.arguments.get(k))
                print(f"distcomp: MLFlowLogger({asked}) logs into the job's MLflow run {job_run_id()} (experiment "
                      f"{os.environ.get('MLFLOW_EXPERIMENT_ID', '?')}), not a run of its own", file=sys.stderr,
                      flush=True)
        original(*bound.args, **bound.kwargs)

    logger.__init__ = __init__  # type: ignore[misc]
