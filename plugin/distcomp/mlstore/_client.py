"""Any other store (PostgreSQL, MySQL, Databricks, a SQLite file MLflow has not created yet)
through MLflow's own client. This is the slow path: it imports mlflow."""

from __future__ import annotations

from pathlib import Path, PurePosixPath
from typing import Any, Mapping, Sequence

import mlflow  # noqa: F401  (ImportError here tells open_store that MLflow is missing)

from ._params import KnownParams, fit, log_new
from ._records import (MAX_METRICS_PER_BATCH, MAX_PARAMS_TAGS_PER_BATCH, Metric, RunData, RunRef, StoredRun,
                       StoreUnavailable, TrackingError)
from ._retry import TRANSIENT_HTTP

REFUSED = object()  # what _do answers for an error code the caller expects


class ClientStore:
    def __init__(self, uri: str) -> None:
        import logging

        from mlflow import MlflowClient

        # "Creating initial MLflow database tables..." on a new database: distcomp says it once
        logging.getLogger("mlflow.store.db.utils").setLevel(logging.WARNING)
        self.uri = uri
        self.params = KnownParams(lambda run_id: self.run_data(run_id).params)
        try:
            self.client = MlflowClient(tracking_uri=uri)
        except Exception as exc:  # the URI names an unknown scheme or a broken database
            raise TrackingError(f"MLflow cannot open the tracking store {uri}: {_text(exc)}") from None

    def ready(self) -> None:
        """Open the store now: MLflow creates a new database's tables on first use."""
        self._do("open the store", self.client.search_experiments, max_results=1)

    def _do(self, what: str, call: Any, *args: Any, ok_codes: tuple[str, ...] = (), **kwargs: Any) -> Any:
        """``call``'s answer; an MLflow error code in ``ok_codes`` is returned as REFUSED."""
        from mlflow.exceptions import MlflowException

        try:
            return call(*args, **kwargs)
        except MlflowException as exc:
            if exc.error_code in ok_codes:
                return REFUSED
            error = StoreUnavailable if exc.get_http_status_code() in TRANSIENT_HTTP else TrackingError
            raise error(f"MLflow could not {what} in {self.uri}: {_text(exc)}") from None
        except OSError as exc:
            raise TrackingError(f"MLflow could not {what} in {self.uri}: {exc}") from None
        except Exception as exc:  # SQLAlchemy, alembic, a driver: their text is no message for a user
            transient = type(exc).__name__ == "OperationalError"  # a locked or unreachable database
            error = StoreUnavailable if transient else TrackingError
            raise error(f"MLflow could not {what} in {self.uri} ({type(exc).__module__}.{type(exc).__name__}"
                        f"{'; try again later' if transient else ''})") from None

    def experiment(self, name: str, tags: Mapping[str, str] = {}) -> str:
        exp = self._do("look up the experiment", self.client.get_experiment_by_name, name)
        if exp is None:
            try:
                return str(self._do("create the experiment", self.client.create_experiment, name, tags=dict(tags)))
            except TrackingError:  # a job starting beside this one may have made it meanwhile
                exp = self._do("look up the experiment", self.client.get_experiment_by_name, name)
                if exp is None:
                    raise
        if exp.lifecycle_stage != "active":
            raise TrackingError(f"experiment {name!r} is deleted in {self.uri}; restore it or pick another "
                                "with --experiment")
        return str(exp.experiment_id)

    def create_run(self, experiment_id: str, name: str, tags: Mapping[str, str],
                   params: Mapping[str, str]) -> RunRef:
        run = self._do("create the run", self.client.create_run, experiment_id, tags=dict(tags), run_name=name)
        ref = RunRef(run.info.run_id, str(run.info.experiment_id), run.info.artifact_uri, name)
        self.params.created(ref.run_id)
        problems = self.log(ref.run_id, {}, params)
        if problems:  # a run this process made holds no params but its own
            raise TrackingError("; ".join(problems))
        return ref

    def get_run(self, run_id: str) -> RunRef:
        run = self._do("find the run", self.client.get_run, run_id)
        if run.info.lifecycle_stage != "active":
            raise TrackingError(f"MLflow run {run_id} is deleted in {self.uri}")
        return RunRef(run_id, str(run.info.experiment_id), run.info.artifact_uri, run.info.run_name or "")

    def runs_since(self, experiment_id: str, since_ms: int) -> list[StoredRun]:
        runs = self._do("search the experiment's runs", self.client.search_runs, [experiment_id],
                        f"attributes.start_time >= {int(since_ms)}", max_results=1000,
                        order_by=["attributes.start_time ASC"])
        return [StoredRun(r.info.run_id, r.info.run_name or "", str(r.info.experiment_id), int(r.info.start_time or 0),
                          dict(r.data.tags)) for r in runs]

    def run_data(self, run_id: str) -> RunData:
        run = self._do("find the run", self.client.get_run, run_id)
        return RunData(dict(run.data.tags), dict(run.data.params))

    def log(self, run_id: str, tags: Mapping[str, str], params: Mapping[str, str] = {},
            metrics: Sequence[Metric] = ()) -> list[str]:
        tags, params = fit(tags, params)  # MLflow's limit, said in a tag
        from mlflow.entities import Metric as MlflowMetric, Param, RunTag

        points = [MlflowMetric(m.key, m.value, m.timestamp, m.step) for m in metrics]
        for i in range(0, len(points), MAX_METRICS_PER_BATCH):
            self._do("log metrics", self.client.log_batch, run_id, metrics=points[i:i + MAX_METRICS_PER_BATCH])
        tag_list = [RunTag(k, v) for k, v in tags.items()]
        for i in range(0, len(tag_list), MAX_PARAMS_TAGS_PER_BATCH):
            self._do("set tags", self.client.log_batch, run_id, tags=tag_list[i:i + MAX_PARAMS_TAGS_PER_BATCH])

        def send(batch: dict[str, str]) -> bool:
            return self._do("log params", self.client.log_batch, run_id, params=[Param(k, v) for k, v in batch.items()],
                            ok_codes=("INVALID_PARAMETER_VALUE",)) is not REFUSED

        return log_new(self.params, run_id, params, MAX_PARAMS_TAGS_PER_BATCH, send) if params else []

    def upload(self, run: RunRef, files: Sequence[tuple[Path, str]]) -> None:
        self.upload_files(run.run_id, files)

    def upload_files(self, run_id: str, files: Sequence[tuple[Path, str]]) -> None:
        for source, path in files:
            folder = str(PurePosixPath(path).parent)
            self._do("upload an artifact", self.client.log_artifact, run_id, str(source),
                     None if folder == "." else folder)

    def reopen(self, run_id: str) -> None:
        self._do("reopen the run", self.client.update_run, run_id, "RUNNING")

    def terminate(self, run_id: str, status: str, end_ms: int | None = None) -> None:
        self._do("end the run", self.client.set_terminated, run_id, status, end_ms)


def _text(exc: BaseException) -> str:
    """The first line of an error, cut: MLflow may carry a driver's whole statement in it."""
    text = str(getattr(exc, "message", exc)).strip()
    for driver in (" Error: (", " [SQL: ", " (Background on this error"):  # SQLAlchemy's text MLflow appends
        text = text.split(driver)[0]
    return (text.splitlines() or [""])[0][:300]
