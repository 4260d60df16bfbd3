"""The direct SQLite writer against the MLflow versions the project accepts, for real: each
MLflow makes the store with its own migrations, distcomp writes a run through the fast path,
the same MLflow writes the same run through its own client, and that MLflow reads both back.
The oldest accepted MLflow (pyproject's ``mlflow>=X``) comes from PyPI, into the session's cache folder;
the newest is the installed one. A revision the writer was not made for goes to MLflow."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from distcomp.tracking import TrackingError, open_store
from distcomp.mlstore import _revisions
from distcomp.mlstore._client import ClientStore
from distcomp.mlstore._sqlite import SqliteStore

from .test_stores import PARAMS, POINTS, TAGS, _metric_rows, _rows

ROOT = Path(__file__).resolve().parents[2]

# Run by the MLflow under test (argv: what, uri, ...): prints one JSON line.
MLFLOW_SIDE = r"""
import json, sys
import mlflow
from mlflow import MlflowClient
from mlflow.entities import Metric, Param, RunTag

what, uri = sys.argv[1], sys.argv[2]
client = MlflowClient(uri)
if what == "create":  # a new store, made by this MLflow's own migrations
    client.search_experiments()
    print(json.dumps({"version": mlflow.__version__}))
else:  # "check": distcomp's run written again through this MLflow's client, and both read back
    ours, exp, name, tags, params, points = json.loads(sys.argv[3])
    theirs = client.create_run(exp, tags=tags, run_name=name).info.run_id
    client.log_batch(theirs, params=[Param(k, v) for k, v in params.items()])
    client.log_batch(theirs, tags=[RunTag("t", "v")])
    for batch in points:
        client.log_batch(theirs, metrics=[Metric(*m) for m in batch])
    client.set_terminated(theirs, "FINISHED")

    def read(run_id):
        run = client.get_run(run_id)
        history = {k: sorted((repr(m.value), m.timestamp, m.step) for m in client.get_metric_history(run_id, k))
                   for k in run.data.metrics}
        return {"status": run.info.status, "name": run.info.run_name, "params": run.data.params,
                "tags": {k: v for k, v in run.data.tags.items() if not k.startswith("mlflow.")},
                "latest": {k: repr(v) for k, v in run.data.metrics.items()}, "history": history,
                "artifact_uri": run.info.artifact_uri}

    print(json.dumps({"theirs": theirs, "ours": read(ours), "their_read": read(theirs)}))
"""


def oldest_accepted() -> str:
    """The lower bound of pyproject's ``mlflow`` requirement in the ``mlflow`` extra."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    for text in project["optional-dependencies"]["mlflow"]:
        req = Requirement(text)
        if req.name == "mlflow":
            return next(s.version for s in req.specifier if s.operator == ">=")
    raise AssertionError("pyproject's mlflow extra names no mlflow>=X")


def install_mlflow(version: str) -> Path:
    """A folder holding MLflow ``version``'s code (mlflow-skinny, with the store and its
    migrations, and mlflow-tracing), put first on PYTHONPATH; the rest comes from this venv.
    Kept in the session's cache folder (tests/conftest.py points XDG_CACHE_HOME there: about 50 MB,
    3 s to install), so a run leaves nothing in the user's ~/.cache."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "distcomp-tests"
    done = cache / f"mlflow-{version}"
    if (done / ".complete").is_file():
        return done
    cache.mkdir(parents=True, exist_ok=True)
    staging = cache / f".mlflow-{version}-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    # SQLAlchemy 2.1 removed a pool class MLflow before 3.10 imports: such a release needs 2.0
    pins = ["sqlalchemy<2.1"] if Version(version) < Version("3.10") else []
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--disable-pip-version-check",
                    "--target", str(staging), f"mlflow-skinny=={version}", f"mlflow-tracing=={version}", *pins],
                   check=True, capture_output=True, text=True, timeout=600)
    (staging / ".complete").touch()
    try:
        staging.rename(done)
    except OSError:  # another session made it meanwhile
        shutil.rmtree(staging, ignore_errors=True)
    return done


def mlflow_side(site: Path | None, *args: str) -> dict:
    env = {**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true"}
    if site is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(site), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    proc = subprocess.run([sys.executable, "-W", "ignore", "-c", MLFLOW_SIDE, *args], env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def round_trip(site: Path | None, db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Write through the fast path into ``db`` (made by that MLflow) and check it against that
    MLflow's own writing and reading."""
    monkeypatch.chdir(db.parent)  # both resolve the default artifact root from the cwd
    uri = f"sqlite:///{db}"
    with sqlite3.connect(db) as con:
        revision = _revisions.revision(con)
    assert revision in _revisions.HEADS, f"this MLflow makes schema revision {revision}: see _revisions"

    store = open_store(uri, {})
    assert isinstance(store, SqliteStore)
    exp = store.experiment("fast")
    ours = store.create_run(exp, "job-1", TAGS, PARAMS)
    batches = [POINTS[:4], POINTS[4:]]  # the latest point must survive a later, older batch
    for batch in batches:
        store.log(ours.run_id, {"t": "v"}, metrics=batch)
    store.terminate(ours.run_id, "FINISHED")

    plain = [[[m.key, m.value, m.timestamp, m.step] for m in batch] for batch in batches]
    out = mlflow_side(site, "check", uri, json.dumps([ours.run_id, exp, "job-1", TAGS, PARAMS, plain]))
    assert _rows(db, ours.run_id) == _rows(db, out["theirs"])
    assert _metric_rows(db, ours.run_id) == _metric_rows(db, out["theirs"])
    read_ours, read_theirs = out["ours"], out["their_read"]
    assert read_ours.pop("artifact_uri") == ours.artifact_uri
    read_theirs.pop("artifact_uri")
    assert read_ours == read_theirs
    assert read_ours["status"] == "FINISHED" and read_ours["params"] == PARAMS
    assert sum(len(h) for h in read_ours["history"].values()) == len(POINTS) - 1  # one point is there twice
    assert read_ours["latest"] == {"loss": "0.5", "odd": "nan", "late": "1.0"}


# more MLflow releases to check the same way, e.g. before adding a head to _revisions:
# DISTCOMP_TEST_MLFLOW="3.8.0 3.9.0" (each about 3 MB from PyPI, 50 MB in the cache)
MORE = os.environ.get("DISTCOMP_TEST_MLFLOW", "").split()


@pytest.mark.slow
@pytest.mark.parametrize("release", ["oldest", *MORE])
def test_the_oldest_accepted_mlflow_reads_what_the_fast_path_wrote(release: str, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    version = oldest_accepted() if release == "oldest" else release
    site = install_mlflow(version)
    db = tmp_path / "mlflow.db"
    assert Version(mlflow_side(site, "create", f"sqlite:///{db}")["version"]) == Version(version)
    round_trip(site, db, monkeypatch)


@pytest.mark.slow
def test_the_installed_mlflow_reads_what_the_fast_path_wrote(sqlite_uri: str, monkeypatch: pytest.MonkeyPatch) -> None:
    round_trip(None, Path(sqlite_uri[len("sqlite:///"):]), monkeypatch)  # made by the installed MLflow


def test_a_revision_the_writer_was_not_made_for_goes_through_mlflow(sqlite_uri: str,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The store of an MLflow newer than the writer knows (the installed MLflow, taken off the
    list): MLflow's own store writes it, every point lands, and the job says why, once."""
    from mlflow import MlflowClient

    db = Path(sqlite_uri[len("sqlite:///"):])
    with sqlite3.connect(db) as con:
        revision = _revisions.revision(con)
    monkeypatch.setattr(_revisions, "HEADS", {k: v for k, v in _revisions.HEADS.items() if k != revision})
    notes: list[str] = []
    store = open_store(sqlite_uri, {}, notify=notes.append)
    assert isinstance(store, ClientStore)
    assert len(notes) == 1 and f"{db} has schema revision {revision}" in notes[0] and "MLflow's own store" in notes[0]
    run = store.create_run(store.experiment("fallback"), "job-1", {"k": "v"}, PARAMS)
    store.log(run.run_id, {}, metrics=POINTS)
    store.terminate(run.run_id, "FINISHED")
    client = MlflowClient(sqlite_uri)
    got = client.get_run(run.run_id)
    assert got.info.status == "FINISHED" and got.data.params == PARAMS
    stored = sum(len(client.get_metric_history(run.run_id, k)) for k in ("loss", "odd", "late"))
    assert stored == len(POINTS) - 1  # one point is there twice: MLflow keeps it once
    assert isinstance(open_store(sqlite_uri, {}), ClientStore)  # the ranks' open: no notice to give


def test_a_future_revision_is_written_by_nobody(template_db: Path, tmp_path: Path) -> None:
    """A store stamped by an MLflow newer than the installed one: distcomp does not write it,
    and MLflow's own store refuses it with its own message; nothing is written."""
    db = tmp_path / "future.db"
    shutil.copyfile(template_db, db)
    with sqlite3.connect(db) as con:
        con.execute("UPDATE alembic_version SET version_num = 'ffffffffffff'")
    before = db.read_bytes()
    notes: list[str] = []
    with pytest.raises(TrackingError, match="ffffffffffff.*mlflow db upgrade"):
        open_store(f"sqlite:///{db}", {}, notify=notes.append)
    assert len(notes) == 1 and "schema revision ffffffffffff" in notes[0]
    assert db.read_bytes() == before


def test_a_database_without_a_revision_goes_to_mlflow(template_db: Path, tmp_path: Path) -> None:
    db = tmp_path / "norev.db"
    shutil.copyfile(template_db, db)
    with sqlite3.connect(db) as con:
        con.execute("DELETE FROM alembic_version")
    notes: list[str] = []
    with pytest.raises(TrackingError):  # MLflow's own store will not guess either
        open_store(f"sqlite:///{db}", {}, notify=notes.append)
    assert notes and "no MLflow schema revision" in notes[0]


@pytest.mark.slow
def test_a_job_on_a_future_store_says_why_once_and_stops_cleanly(template_db: Path, tmp_path: Path) -> None:
    from ..targets._jobs import clean_env
    from ._probe import PROBE

    db = tmp_path / "future.db"
    shutil.copyfile(template_db, db)
    with sqlite3.connect(db) as con:
        con.execute("UPDATE alembic_version SET version_num = 'ffffffffffff'")
    state = tmp_path / "state"
    state.mkdir()
    proc = subprocess.run([sys.executable, "-m", "distcomp", "run", str(PROBE / "torch.yaml"), "--nproc-per-node", "1",
                           "--run-dir", str(tmp_path / "run"), "--input", f"state_dir={state}"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120, env=clean_env(MLFLOW_TRACKING_URI=f"sqlite:///{db}"))
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("schema revision ffffffffffff, which distcomp's direct SQLite writer") == 1, proc.stderr
    assert "mlflow db upgrade" in proc.stderr and "Traceback" not in proc.stderr
    assert not list(state.iterdir())  # no rank ran
