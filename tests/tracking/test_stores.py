"""The stores the launcher writes without importing mlflow: what they write must be what
MLflow writes and reads back, and anything they cannot write faithfully goes to MLflow."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from mlflow import MlflowClient

from distcomp.tracking import Metric, TrackingError, job_params, open_store, resolve_uri
from distcomp.mlstore._uri import normalise
from distcomp.mlstore._client import ClientStore
from distcomp.mlstore._rest import RestStore
from distcomp.mlstore._sqlite import SqliteStore

TAGS = {"distcomp.component": "c", "mlflow.user": "someone", "long": "x" * 7000}
PARAMS = {"epochs": "3", "lr": "0.1"}


def _rows(db: Path, run_id: str) -> dict[str, object]:
    con = sqlite3.connect(db)
    con.row_factory = sqlite3.Row
    run = dict(con.execute("SELECT * FROM runs WHERE run_uuid = ?", (run_id,)).fetchone())
    exp = dict(con.execute("SELECT * FROM experiments WHERE experiment_id = ?", (run["experiment_id"],)).fetchone())
    tags = dict(con.execute("SELECT key, value FROM tags WHERE run_uuid = ?", (run_id,)).fetchall())
    params = dict(con.execute("SELECT key, value FROM params WHERE run_uuid = ?", (run_id,)).fetchall())
    con.close()
    run["artifact_uri"] = str(run["artifact_uri"]).replace(f"/{run['experiment_id']}/{run_id}/", "/EXP/RUN/")
    for row in (run, exp):  # ids and clocks differ between any two runs
        for key in ("run_uuid", "start_time", "end_time", "creation_time", "last_update_time", "experiment_id"):
            row.pop(key, None)
    return {"run": run, "experiment": exp, "tags": tags, "params": params}


def test_sqlite_store_writes_what_mlflow_writes(sqlite_uri: str, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)  # both resolve the default artifact root from the cwd
    db = Path(sqlite_uri[len("sqlite:///"):])
    store = open_store(sqlite_uri, {})
    assert isinstance(store, SqliteStore)
    ours = store.create_run(store.experiment("direct"), "job-1", TAGS, PARAMS)
    store.terminate(ours.run_id, "FAILED")

    client = MlflowClient(sqlite_uri)
    theirs = client.create_run(client.create_experiment("viamlflow"), tags=TAGS, run_name="job-1")
    client.log_batch(theirs.info.run_id, params=[__import__("mlflow").entities.Param(k, v) for k, v in PARAMS.items()])
    client.set_terminated(theirs.info.run_id, "FAILED")

    a, b = _rows(db, ours.run_id), _rows(db, theirs.info.run_id)
    a["experiment"].pop("name"), b["experiment"].pop("name")
    a["experiment"]["artifact_location"] = Path(str(a["experiment"]["artifact_location"])).parent
    b["experiment"]["artifact_location"] = Path(str(b["experiment"]["artifact_location"])).parent
    assert a == b
    # and MLflow reads ours as one of its own
    got = client.get_run(ours.run_id)
    assert got.info.status == "FAILED" and got.info.run_name == "job-1" and got.data.params == PARAMS
    assert got.info.artifact_uri == ours.artifact_uri and got.info.end_time >= got.info.start_time


NAN, INF = float("nan"), float("inf")
POINTS = [Metric("loss", 1.0, 1000, 0), Metric("loss", 0.5, 1001, 1), Metric("loss", 0.5, 1001, 1),
          Metric("loss", 0.7, 999, 1), Metric("loss", 0.9, 5, 0), Metric("odd", NAN, 10, 3), Metric("odd", INF, 11, 2),
          Metric("odd", -INF, 12, 2), Metric("late", 2.0, 50, 7), Metric("late", 1.0, 60, 7)]


def _metric_rows(db: Path, run_id: str) -> tuple[list[tuple], list[tuple]]:
    con = sqlite3.connect(db)
    points = sorted(con.execute("SELECT key, value, timestamp, step, is_nan FROM metrics WHERE run_uuid = ?",
                                (run_id,)).fetchall())
    latest = sorted(con.execute("SELECT key, value, timestamp, step, is_nan FROM latest_metrics WHERE run_uuid = ?",
                                (run_id,)).fetchall())
    con.close()
    return points, latest


def test_sqlite_metrics_are_stored_as_mlflow_stores_them(sqlite_uri: str) -> None:
    from mlflow.entities import Metric as MlflowMetric

    db = Path(sqlite_uri[len("sqlite:///"):])
    store = open_store(sqlite_uri, {})
    exp = store.experiment("metrics")
    ours = store.create_run(exp, "a", {}, {})
    store.log(ours.run_id, {}, metrics=POINTS[:4])
    store.log(ours.run_id, {}, metrics=POINTS[4:])  # the latest point must survive a later, older batch
    client = MlflowClient(sqlite_uri)
    theirs = client.create_run(exp).info.run_id
    client.log_batch(theirs, metrics=[MlflowMetric(m.key, m.value, m.timestamp, m.step) for m in POINTS[:4]])
    client.log_batch(theirs, metrics=[MlflowMetric(m.key, m.value, m.timestamp, m.step) for m in POINTS[4:]])
    assert _metric_rows(db, ours.run_id) == _metric_rows(db, theirs)
    def latest(run_id: str) -> dict[str, str]:
        return {k: repr(v) for k, v in client.get_run(run_id).data.metrics.items()}  # repr: nan == nan

    assert latest(ours.run_id) == latest(theirs) and latest(theirs)["odd"] == "nan"


def test_sqlite_store_refuses_a_deleted_run(sqlite_uri: str) -> None:
    store = open_store(sqlite_uri, {})
    run = store.create_run(store.experiment("e"), "r", {}, {})
    MlflowClient(sqlite_uri).delete_run(run.run_id)
    with pytest.raises(TrackingError, match="deleted"):
        store.log(run.run_id, {}, metrics=POINTS[:1])


def test_sqlite_store_finds_an_existing_experiment_and_refuses_a_deleted_one(sqlite_uri: str) -> None:
    client = MlflowClient(sqlite_uri)
    kept, gone = client.create_experiment("kept"), client.create_experiment("gone")
    client.delete_experiment(gone)
    store = open_store(sqlite_uri, {})
    assert store.experiment("kept") == kept
    with pytest.raises(TrackingError, match="deleted.*restore"):
        store.experiment("gone")


def test_sqlite_store_uploads_and_logs_into_mlflows_layout(sqlite_uri: str, tmp_path: Path) -> None:
    store = open_store(sqlite_uri, {})
    run = store.create_run(store.experiment("e"), "r", {}, {"a": "1"})
    log = tmp_path / "rank0.log"
    log.write_text("hello\n")
    store.upload(run, [(log, "logs/rank0.log")])
    assert store.log(run.run_id, {"t": "v"}, {"a": "1", "b": "2"}) == []
    assert "already" in store.log(run.run_id, {}, {"a": "changed"})[0]
    client = MlflowClient(sqlite_uri)
    assert Path(client.download_artifacts(run.run_id, "logs/rank0.log", str(tmp_path / "dl"))).read_text() == "hello\n"
    assert client.get_run(run.run_id).data.params == {"a": "1", "b": "2"}


def test_unknown_schema_or_missing_database_goes_through_mlflow(template_db: Path, tmp_path: Path) -> None:
    odd = tmp_path / "odd.db"
    odd.write_bytes(template_db.read_bytes())
    con = sqlite3.connect(odd)
    con.execute("ALTER TABLE runs ADD COLUMN required_thing TEXT NOT NULL DEFAULT 'x'")
    con.commit()
    assert isinstance(open_store(f"sqlite:///{odd}", {}), SqliteStore)  # a defaulted column is fine
    con.execute("CREATE TABLE params_new (key TEXT, run_uuid TEXT)")
    con.execute("DROP TABLE params")
    con.execute("ALTER TABLE params_new RENAME TO params")
    con.commit()
    con.close()
    assert isinstance(open_store(f"sqlite:///{odd}", {}), ClientStore)
    assert isinstance(open_store(f"sqlite:///{tmp_path / 'new.db'}", {}), ClientStore)
    assert isinstance(open_store(f"sqlite:///{template_db}", {"MLFLOW_WORKSPACE": "team"}), ClientStore)


def test_rest_store_against_a_real_server(mlflow_server: str, tmp_path: Path) -> None:
    store = open_store(mlflow_server, {})
    assert isinstance(store, RestStore)
    exp = store.experiment(f"rest-{tmp_path.name}")
    assert store.experiment(f"rest-{tmp_path.name}") == exp
    run = store.create_run(exp, "job-9", {"distcomp.component": "c", "mlflow.user": "me"}, PARAMS)
    log = tmp_path / "rank1.log"
    log.write_bytes(b"\x00binary and text\n")
    store.upload(run, [(log, "logs/rank1.log")])
    store.log(run.run_id, {"distcomp.state": "failed"}, metrics=POINTS * 150)  # 1,500 points: two batches
    store.terminate(run.run_id, "KILLED")
    client = MlflowClient(mlflow_server)
    got = client.get_run(run.run_id)
    assert got.info.status == "KILLED" and got.info.run_name == "job-9" and got.info.user_id == "me"
    assert got.data.params == PARAMS and got.data.tags["distcomp.state"] == "failed"
    assert Path(client.download_artifacts(run.run_id, "logs/rank1.log", str(tmp_path / "dl"))).read_bytes() == \
        b"\x00binary and text\n"
    history = client.get_metric_history(run.run_id, "loss")
    assert sorted((m.step, m.timestamp, m.value) for m in history) == \
        sorted({(m.step, m.timestamp, m.value) for m in POINTS if m.key == "loss"})
    odd = {m.timestamp: m.value for m in client.get_metric_history(run.run_id, "odd")}
    assert odd[11] > 1e308 and odd[12] < -1e308 and odd[10] != odd[10]  # inf, -inf, NaN
    assert store.get_run(run.run_id).artifact_uri == run.artifact_uri
    with pytest.raises(TrackingError, match="does not exist"):
        store.get_run("0" * 32)


def test_rest_store_leaves_unusual_auth_to_mlflow() -> None:
    assert isinstance(open_store("http://127.0.0.1:9", {}), RestStore)
    assert isinstance(open_store("http://127.0.0.1:9", {"MLFLOW_TRACKING_AUTH": "plugin"}), ClientStore)


@pytest.mark.parametrize("uri, fragment", [
    ("./mlruns", "file store"), ("file:///tmp/mlruns", "file store"), ("sqlite://x.db", "three slashes"),
    ("sqlite:///:memory:", "in-memory"),
])
def test_uri_refusals(uri: str, fragment: str, tmp_path: Path) -> None:
    with pytest.raises(TrackingError, match=fragment):
        resolve_uri({"MLFLOW_TRACKING_URI": uri}, tmp_path)


def test_uri_defaults_and_absolute_paths(tmp_path: Path) -> None:
    assert resolve_uri({}, tmp_path) == f"sqlite:///{tmp_path}/mlflow.db"
    assert resolve_uri({"MLFLOW_TRACKING_URI": "sqlite:///sub/x.db"}, tmp_path) == f"sqlite:///{tmp_path}/sub/x.db"
    assert resolve_uri({"MLFLOW_TRACKING_URI": "sqlite:////abs/x.db"}, tmp_path) == "sqlite:////abs/x.db"
    assert resolve_uri({"MLFLOW_TRACKING_URI": "http://h:5000"}, tmp_path) == "http://h:5000"


@pytest.mark.parametrize(("one", "other"), [
    ("http://127.0.0.1:5000", "http://127.0.0.1:5000/"),
    ("http://Host:5000/api", "HTTP://host:5000/api//"),
    ("http://host", "http://host:80/"),
    ("https://host/x", "https://HOST:443/x/"),
    ("sqlite:///sub/x.db", "sqlite:///{cwd}/sub/./x.db"),
    ("sqlite:////abs/x.db", "sqlite:////abs/y/../x.db"),
    ("file:///abs/mlruns/", "/abs/mlruns"),
    ("mlruns", "file://{cwd}/mlruns"),
])
def test_one_store_spelled_two_ways_normalises_to_one_uri(one: str, other: str, tmp_path: Path) -> None:
    assert normalise(one, tmp_path) == normalise(other.format(cwd=tmp_path), tmp_path)


@pytest.mark.parametrize(("one", "other"), [
    ("http://host:5000", "http://host:5001"), ("http://host:5000", "https://host:5000"),
    ("http://host:5000/a", "http://host:5000/b"), ("sqlite:///x.db", "sqlite:////x.db"),
    ("http://h:5000", "postgresql://h:5000"),
])
def test_two_stores_stay_two(one: str, other: str, tmp_path: Path) -> None:
    assert normalise(one, tmp_path) != normalise(other, tmp_path)


def test_params_keep_secrets_out() -> None:
    params = job_params({"api_key": "k", "DB_PASSWORD": "p", "auth_token": "t", "epochs": 3, "cfg": [1, 2],
                         "unset": None, "notes": "y" * 7000})
    assert params["api_key"] == params["DB_PASSWORD"] == params["auth_token"] == "***"
    assert params["epochs"] == "3" and params["cfg"] == "[1, 2]" and "unset" not in params
    assert params["notes"] == "y" * 7000  # whole: the store cuts it to MLflow's limit, and says so in a tag


def test_creating_a_run_does_not_import_mlflow(sqlite_uri: str, tmp_path: Path) -> None:
    code = ("import sys; from distcomp.tracking import open_store; s = open_store(sys.argv[1], {}); "
            "r = s.create_run(s.experiment('e'), 'n', {}, {}); s.terminate(r.run_id, 'FINISHED'); "
            "assert 'mlflow' not in sys.modules and 'sqlalchemy' not in sys.modules, 'imported'")
    subprocess.run([sys.executable, "-c", code, sqlite_uri], check=True, timeout=60)


def _open(request: pytest.FixtureRequest) -> tuple[object, str]:
    """(a store of the kind ``request.param`` names, the URI MlflowClient reads it back with)."""
    if request.param == "rest":
        uri = request.getfixturevalue("mlflow_server")
        return RestStore(uri, {}), uri
    uri = request.getfixturevalue("sqlite_uri")
    return (SqliteStore(uri) if request.param == "sqlite" else ClientStore(uri)), uri


@pytest.fixture(params=["sqlite", pytest.param("rest", marks=pytest.mark.slow), "client"])
def each_store(request: pytest.FixtureRequest) -> tuple[object, str]:
    return _open(request)


def test_a_param_conflict_costs_no_other_param_on_any_store(each_store: tuple, tmp_path: Path) -> None:
    store, uri = each_store
    run = store.create_run(store.experiment(f"params-{tmp_path.name}"), "r", {}, {"a": "1"})
    problems = store.log(run.run_id, {"t": "v"}, {"a": "2", "b": "3", "c": "4"})
    client = MlflowClient(uri)
    got = client.get_run(run.run_id).data
    assert got.params == {"a": "1", "b": "3", "c": "4"} and got.tags["t"] == "v"
    assert problems == [f"param 'a' is already '1' in run {run.run_id}; kept that, not '2'"]
    # another writer sets a param this store has not seen: its value stays, named; the rest lands
    client.log_param(run.run_id, "d", "theirs")
    problems = store.log(run.run_id, {}, {"d": "ours", "e": "5", "b": "3"})
    assert problems == [f"param 'd' is already 'theirs' in run {run.run_id}; kept that, not 'ours'"]
    assert client.get_run(run.run_id).data.params == {"a": "1", "b": "3", "c": "4", "d": "theirs", "e": "5"}
    # 150 new params: two batches, all in
    assert store.log(run.run_id, {}, {f"p{i}": str(i) for i in range(150)}) == []
    assert len(client.get_run(run.run_id).data.params) == 155
    # a value over MLflow's 6000 characters is cut, as MLflow cuts it
    assert store.log(run.run_id, {}, {"long": "x" * 6001}) == []
    assert client.get_run(run.run_id).data.params["long"] == "x" * 6000


def test_a_param_over_mlflows_limit_is_cut_and_the_run_says_so_on_any_store(
        each_store: tuple, tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    from mlflow.utils.validation import MAX_PARAM_VAL_LENGTH

    store, uri = each_store
    run = store.create_run(store.experiment(f"long-{tmp_path.name}"), "r", {}, {"made": "m" * 7000, "ok": "1"})
    assert store.log(run.run_id, {}, {"logged": "l" * (MAX_PARAM_VAL_LENGTH + 1), "fits": "f" * 6000}) == []
    data = MlflowClient(uri).get_run(run.run_id).data
    assert data.params == {"made": "m" * MAX_PARAM_VAL_LENGTH, "ok": "1", "logged": "l" * MAX_PARAM_VAL_LENGTH,
                           "fits": "f" * 6000}
    notes = {k: v for k, v in data.tags.items() if k.startswith("distcomp.truncated_param.")}
    assert notes == {
        "distcomp.truncated_param.made": "7000 characters, over MLflow's limit: the param holds the first 6000",
        "distcomp.truncated_param.logged": "6001 characters, over MLflow's limit: the param holds the first 6000"}
    assert "truncated" not in capfd.readouterr().err  # MLflow's own warning (the value's start) is not printed


@pytest.fixture(params=[pytest.param("rest", marks=pytest.mark.slow), "client"])
def validating_store(request: pytest.FixtureRequest) -> tuple[object, str]:
    """The stores MLflow itself validates (the SQLite writer trusts its callers' names)."""
    return _open(request)


def test_a_param_the_store_refuses_costs_no_other_param(validating_store: tuple, tmp_path: Path) -> None:
    store, uri = validating_store
    run = store.create_run(store.experiment(f"refused-{tmp_path.name}"), "r", {}, {})
    problems = store.log(run.run_id, {}, {"f": "6", "bad name!": "x", "g": "7"})
    assert MlflowClient(uri).get_run(run.run_id).data.params == {"f": "6", "g": "7"}
    assert problems == [f"param 'bad name!' of run {run.run_id} was refused by the store; the others were logged"]


def test_the_view_command_is_one_pasteable_line_when_the_path_has_a_space(tmp_path: Path) -> None:
    import shlex

    from distcomp.tracking import JobRun, RunRef, describe

    uri = f"sqlite:///{tmp_path}/job dir/mlflow.db"
    line = describe(JobRun(None, RunRef("abc", "1", ""), uri, "exp"))  # type: ignore[arg-type]
    assert shlex.split(line.partition("; view: ")[2]) == ["mlflow", "ui", "--backend-store-uri", uri]
