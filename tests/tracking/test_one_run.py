"""One MLflow run per job, whatever the training script does: real ``distcomp run`` of a 2-rank
torch job written for plain MLflow (tests/tracking/jobs/onerun), against a real SQLite store or
``mlflow server``. Two ``with mlflow.start_run():`` per rank land in the job's run (rank 0's
metrics, not rank 1's), a nested run is its child, a run the script makes itself is told on the
console and on the job's run, the run is named after the job and its experiment is a
model-training one; with tracking off the rank's Python is left as it was."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from mlflow import MlflowClient

from distcomp.tracking import RANK_SITE, open_store
from distcomp.mlstore._client import ClientStore
from distcomp.mlstore._rest import RestStore
from distcomp.mlstore._sqlite import SqliteStore

from ..targets._jobs import clean_env
from ._probe import explain
from tests._metrics import ranks_metrics

SPEC = Path(__file__).resolve().parent / "jobs" / "onerun" / "component.yaml"
KIND = "mlflow.experimentKind"
WAIT = 180


def run_job(tmp_path: Path, uri: str | None, mode: str, *flags: str, env: dict[str, str] | None = None,
            spec: Path = SPEC) -> tuple[subprocess.CompletedProcess[str], dict[int, dict[str, Any]]]:
    """``distcomp run`` of the one-run job in ``tmp_path``; what each rank saw (STATE/rankN.json)."""
    state = tmp_path / "state"
    state.mkdir(exist_ok=True)
    argv = [sys.executable, "-m", "distcomp", "run", str(spec), "--quiet", "--run-dir", str(tmp_path / "run"),
            "--input", f"mode={mode}", "--input", f"state_dir={state}", *flags]
    full = clean_env(**({"MLFLOW_TRACKING_URI": uri} if uri else {}), **(env or {}))
    full.pop("PYTHONPATH", None)
    full.update(env or {})
    proc = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, env=full, timeout=WAIT)
    seen = {int(p.stem[4:]): json.loads(p.read_text()) for p in state.glob("rank*.json")}
    return proc, seen


def runs_of(uri: str, experiment: str) -> list[Any]:
    client = MlflowClient(uri)
    exp = client.get_experiment_by_name(experiment)
    assert exp is not None, f"no experiment {experiment!r} in {uri}"
    return client.search_runs([exp.experiment_id])


def job_run(runs: list[Any]) -> Any:
    """The job's run: the one run distcomp made (tagged with the job's id)."""
    ours = [r for r in runs if "distcomp.job_id" in r.data.tags]
    assert len(ours) == 1, [(r.info.run_id, r.info.run_name) for r in runs]
    return ours[0]




@pytest.mark.slow
def test_two_runs_on_every_rank_are_the_jobs_one_run(sqlite_uri: str, tmp_path: Path) -> None:
    proc, seen = run_job(tmp_path, sqlite_uri, "twice")
    assert proc.returncode == 0, explain(proc)
    runs = runs_of(sqlite_uri, "one-run")
    job = job_run(runs)
    run_id = job.info.run_id
    # both top-level runs, and the run MLflow starts for a log call with none active, on both ranks
    for rank in (0, 1):
        assert seen[rank]["first"] == seen[rank]["second"] == seen[rank]["after"] == run_id, seen
    # the only other run is rank 0's nested one, a child of the job's run; rank 1 made none
    children = [r for r in runs if r.info.run_id != run_id]
    assert [c.info.run_id for c in children] == [seen[0]["child"]], [(r.info.run_id, r.data.tags) for r in runs]
    assert children[0].data.tags["mlflow.parentRunId"] == run_id and seen[1]["child"] == run_id
    assert children[0].data.metrics == {"fold_score": 0.5}  # rank 0's value (rank 1's is 1.5)
    # both runs' metrics, from rank 0 only (rank 1 logs the same keys plus 1)
    assert job.info.status == "FINISHED"
    client = MlflowClient(sqlite_uri)
    history = sorted((m.step, m.value) for m in client.get_metric_history(run_id, "train_loss"))
    assert history == [(0, 1.0), (1, 0.5), (2, pytest.approx(1 / 3))], history
    assert job.data.metrics["eval_loss"] == 0.25 and job.data.metrics["after"] == 0.0
    assert job.data.params["seed"] == "100"  # rank 1's 101 would have failed rank 1 (a changed param)
    # named after what ran, kept so although the script asked for run_name="evaluate"
    assert job.info.run_name == "one-run@0.3.0 run"
    assert "distcomp.extra_runs" not in job.data.tags and "more MLflow run" not in proc.stderr
    assert f"MLflow run {run_id}: FINISHED" in proc.stderr
    assert runs_of(sqlite_uri, "scripts-own") == []  # set_experiment made it; the job's run stayed where it is


@pytest.mark.slow
def test_a_run_made_with_mlflowclient_is_told(sqlite_uri: str, tmp_path: Path) -> None:
    proc, seen = run_job(tmp_path, sqlite_uri, "client")
    assert proc.returncode == 0, explain(proc)
    side = seen[0]["side"]
    job = job_run(runs_of(sqlite_uri, "one-run"))
    expected = f"rank code created 1 more MLflow run (ID, name): {side} 'side-run' (rank 0, the job's experiment)"
    assert expected in proc.stderr, explain(proc)
    assert "run_id=os.environ['DISTCOMP_MLFLOW_RUN_ID']" in proc.stderr
    warning = job.data.tags["distcomp.extra_runs"]
    assert warning.startswith(expected) and job.info.run_id in warning
    # the run itself says which job made it, and where
    made = MlflowClient(sqlite_uri).get_run(side)
    assert made.data.tags["distcomp.job_run_id"] == job.info.run_id and made.data.tags["distcomp.rank"] == "0"
    assert ranks_metrics(job.data.metrics) == {"train_loss": 1.0}


@pytest.mark.slow
def test_a_script_logging_to_its_own_store_keeps_it_and_is_told(sqlite_uri: str, tmp_path: Path) -> None:
    """``mlflow.set_tracking_uri(...)`` in the script: its run goes there (the job's run is not in
    that store: resuming it would fail the rank), and the end of the job says where it went."""
    proc, seen = run_job(tmp_path, sqlite_uri, "elsewhere")
    assert proc.returncode == 0, explain(proc)
    own = f"sqlite:///{tmp_path / 'state' / 'own.db'}"
    made = MlflowClient(own).get_run(seen[0]["side"])
    assert made.data.metrics == {"x": 1.0} and made.data.tags["distcomp.job_run_id"] == job_run(
        runs_of(sqlite_uri, "one-run")).info.run_id
    assert f"rank code created 1 more MLflow run (ID, name): {made.info.run_id} 'mine' (rank 0, experiment " \
           f"{made.info.experiment_id} of {own}, the script's own store)" in proc.stderr, explain(proc)


@pytest.mark.slow
def test_the_jobs_server_spelled_with_a_trailing_slash_is_the_jobs_store(mlflow_server: str, tmp_path: Path) -> None:
    """``mlflow.set_tracking_uri(URI + "/")`` names the job's own server: every rank's
    ``start_run()`` still resumes the job's one run (no run per rank), and a run the script makes
    with MlflowClient is told as made in the job's experiment, not in "the script's own store"."""
    experiment = f"slash-{tmp_path.name}"  # the server is the session's
    proc, seen = run_job(tmp_path, mlflow_server, "slash", "--experiment", experiment)
    assert proc.returncode == 0, explain(proc)
    runs = runs_of(mlflow_server, experiment)
    job = job_run(runs)
    assert {seen[r]["first"] for r in (0, 1)} == {job.info.run_id}
    assert ranks_metrics(job.data.metrics) == {"train_loss": 1.0}  # rank 0's: one run, written by rank 0 only
    side = seen[0]["side"]
    assert sorted(r.info.run_id for r in runs) == sorted([job.info.run_id, side])
    assert "the script's own store" not in proc.stderr, explain(proc)
    assert f"{side} 'side-run' (rank 0, the job's experiment)" in proc.stderr, explain(proc)


@pytest.mark.slow
def test_a_run_made_without_the_hook_is_found_in_the_experiment(mlflow_server: str, tmp_path: Path) -> None:
    """A Python that ignores PYTHONPATH (``-I``) has no hook: the search of the job's experiment
    at its end still finds the run it made (here through the server's REST API)."""
    experiment = f"unhooked-{tmp_path.name}"  # the server is the session's
    proc, seen = run_job(tmp_path, mlflow_server, "unhooked", "--experiment", experiment)
    assert proc.returncode == 0, explain(proc)
    side = seen[0]["side"]
    assert f"rank code created 1 more MLflow run (ID, name): {side} 'unhooked' (the job's experiment; found there, " \
           "made during the job)" in proc.stderr, explain(proc)
    runs = runs_of(mlflow_server, experiment)
    assert side in job_run(runs).data.tags["distcomp.extra_runs"]
    assert "distcomp.job_run_id" not in MlflowClient(mlflow_server).get_run(side).data.tags


@pytest.mark.slow
def test_the_experiment_distcomp_creates_is_a_training_one_and_a_users_keeps_its_kind(
        sqlite_uri: str, tmp_path: Path) -> None:
    (tmp_path / "new").mkdir()
    proc, _ = run_job(tmp_path / "new", sqlite_uri, "env")
    assert proc.returncode == 0, explain(proc)
    client = MlflowClient(sqlite_uri)
    created = client.get_experiment_by_name("one-run")
    assert created is not None and created.tags[KIND] == "custom_model_development"
    # an experiment the user made keeps what it has, and gets nothing it lacks
    genai = client.create_experiment("chat", tags={KIND: "genai_development"})
    plain = client.create_experiment("plain")
    for name in ("chat", "plain"):
        (tmp_path / name).mkdir()
        proc, _ = run_job(tmp_path / name, sqlite_uri, "env", "--experiment", name)
        assert proc.returncode == 0, explain(proc)
    assert client.get_experiment(genai).tags[KIND] == "genai_development"
    assert KIND not in client.get_experiment(plain).tags
    assert job_run(runs_of(sqlite_uri, "plain")).info.run_name == "one-run@0.3.0 run"


def _user_site(tmp_path: Path) -> Path:
    """A folder of the user's on PYTHONPATH, with a sitecustomize of its own that says it ran."""
    lib = tmp_path / "userlib"
    lib.mkdir()
    (lib / "sitecustomize.py").write_text("import os\nos.environ['USER_SITE_RAN'] = 'yes'\n")
    (lib / "job_helper.py").write_text("")
    (lib / "mymod.py").write_text("")
    return lib


def test_tracking_puts_the_hook_before_the_users_pythonpath_and_costs_no_import(
        sqlite_uri: str, tmp_path: Path) -> None:
    lib = _user_site(tmp_path)
    proc, seen = run_job(tmp_path, sqlite_uri, "env", env={"PYTHONPATH": f"{lib}:/nonexistent/also-kept"})
    assert proc.returncode == 0, explain(proc)
    for rank in (0, 1):
        assert seen[rank]["pythonpath"] == f"{RANK_SITE}:{lib}:/nonexistent/also-kept"
        assert seen[rank]["sitecustomize"] == str(lib / "sitecustomize.py")  # the user's, run after distcomp's
        assert seen[rank]["user_site_ran"] == "yes"
        assert seen[rank]["imported"] == []  # a script without mlflow pays no import: not mlflow, not distcomp
    assert sorted(p.name for p in RANK_SITE.iterdir() if p.suffix == ".py") == ["sitecustomize.py"]


def test_an_env_flags_pythonpath_is_kept_behind_the_hook(sqlite_uri: str, tmp_path: Path) -> None:
    """``--env PYTHONPATH=DIR`` on a tracked job: the hook goes in front of DIR, not instead of it;
    the rank imports the user's module and the user's own sitecustomize runs (after distcomp's)."""
    lib = _user_site(tmp_path)
    proc, seen = run_job(tmp_path, sqlite_uri, "env", "--env", f"PYTHONPATH={lib}")
    assert proc.returncode == 0, explain(proc)
    for rank in (0, 1):
        assert seen[rank]["pythonpath"] == f"{RANK_SITE}:{lib}"
        assert seen[rank]["mymod"] == str(lib / "mymod.py")
        assert seen[rank]["sitecustomize"] == str(lib / "sitecustomize.py")
        assert seen[rank]["user_site_ran"] == "yes"


@pytest.mark.parametrize("tracked", [True, False], ids=["tracked", "untracked"])
def test_an_env_flag_beats_the_specs_pythonpath(sqlite_uri: str, tmp_path: Path, tracked: bool) -> None:
    """As docs/tracking.md says, ``--env`` is over the spec's ``environment_variables``: PYTHONPATH too,
    tracked or not; without ``--env`` the spec's is kept (behind the hook when tracked)."""
    lib = _user_site(tmp_path)
    code = tmp_path / "code"
    code.mkdir()
    shutil.copy(SPEC.parent / "job.py", code / "job.py")
    spec = code / "component.yaml"
    spec.write_text(SPEC.read_text() + "environment_variables:\n  PYTHONPATH: /spec/path\n")
    hook = [str(RANK_SITE)] if tracked else []
    flags = () if tracked else ("--no-tracking",)
    for given, expect in (([], ["/spec/path"]), (["--env", f"PYTHONPATH={lib}"], [str(lib)])):
        where = tmp_path / f"given{len(given)}"
        where.mkdir()
        proc, seen = run_job(where, sqlite_uri if tracked else None, "env", *flags, *given, spec=spec)
        assert proc.returncode == 0, explain(proc)
        assert {seen[r]["pythonpath"] for r in (0, 1)} == {":".join(hook + expect)}, given


def test_tracking_off_leaves_the_ranks_pythonpath_as_it_was(tmp_path: Path) -> None:
    lib = _user_site(tmp_path)
    proc, seen = run_job(tmp_path, None, "env", "--no-tracking", env={"PYTHONPATH": str(lib)})
    assert proc.returncode == 0, explain(proc)
    assert {seen[r]["pythonpath"] for r in (0, 1)} == {str(lib)}
    assert {seen[r]["sitecustomize"] for r in (0, 1)} == {str(lib / "sitecustomize.py")}
    (tmp_path / "none").mkdir()
    proc, seen = run_job(tmp_path / "none", None, "env", "--no-tracking")
    assert proc.returncode == 0, explain(proc)
    assert {seen[r]["pythonpath"] for r in (0, 1)} == {None}


@pytest.fixture(params=["sqlite", pytest.param("server", marks=pytest.mark.slow), "mlflow"])
def any_store(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    if request.param == "sqlite":
        store = open_store(request.getfixturevalue("sqlite_uri"), {})
        assert isinstance(store, SqliteStore)
    elif request.param == "server":
        store = open_store(request.getfixturevalue("mlflow_server"), {})
        assert isinstance(store, RestStore)
    else:
        store = ClientStore(request.getfixturevalue("sqlite_uri"))
    return store


def test_every_store_tags_only_an_experiment_it_creates_and_finds_runs_by_start(any_store: Any,
                                                                                 tmp_path: Path) -> None:
    client = MlflowClient(any_store.uri)
    name = f"kinds-{tmp_path.name}"
    exp = any_store.experiment(name, {KIND: "custom_model_development"})
    assert client.get_experiment(exp).tags == {KIND: "custom_model_development"}
    theirs = client.create_experiment(f"theirs-{tmp_path.name}")
    assert any_store.experiment(f"theirs-{tmp_path.name}", {KIND: "custom_model_development"}) == theirs
    assert client.get_experiment(theirs).tags == {}
    before = client.create_run(exp, start_time=1000, run_name="before")
    after = client.create_run(exp, start_time=5000, tags={"mlflow.parentRunId": "p"}, run_name="after")
    found = any_store.runs_since(exp, 2000)
    assert [(r.run_id, r.name, r.experiment_id, r.start_ms) for r in found] == [(after.info.run_id, "after", exp, 5000)]
    assert found[0].tags["mlflow.parentRunId"] == "p" and before.info.run_id not in {r.run_id for r in found}


LIGHTNING = SPEC.parent.parent / "lightning" / "component.yaml"
KERAS = SPEC.parent.parent / "keras" / "component.yaml"


def _framework_job(tmp_path: Path, uri: str, spec: Path) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "distcomp", "run", str(spec), "--quiet", "--run-dir", str(tmp_path / "run")]
    env = clean_env(MLFLOW_TRACKING_URI=uri)
    env.pop("PYTHONPATH", None)
    return subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, env=env, timeout=WAIT)


@pytest.mark.slow
def test_lightnings_mlflowlogger_logs_into_the_jobs_run(sqlite_uri: str, tmp_path: Path) -> None:
    """``MLFlowLogger()`` at its defaults makes a run in an experiment "lightning_logs" of its own;
    in a distcomp job it writes the job's run, and Lightning's end does not end it."""
    proc = _framework_job(tmp_path, sqlite_uri, LIGHTNING)
    assert proc.returncode == 0, explain(proc)
    client = MlflowClient(sqlite_uri)
    assert client.get_experiment_by_name("lightning_logs") is None
    runs = runs_of(sqlite_uri, "lightning-mlflow")
    assert len(runs) == 1 and runs[0].info.status == "FINISHED"
    run = runs[0]
    assert run.data.params["lr"] == "0.1"  # Lightning's hyperparameters
    # 64 samples, batch 8, 2 ranks: 4 steps an epoch, 2 epochs, logged by rank 0 alone
    assert len(client.get_metric_history(run.info.run_id, "train_loss")) == 8
    assert "distcomp.extra_runs" not in run.data.tags and "more MLflow run" not in proc.stderr
    # one line, from rank 0 alone, says where Lightning's metrics went
    said = f"logs into the job's MLflow run {run.info.run_id} (experiment {run.info.experiment_id})"
    logs = {p.stem: p.read_text() for p in (tmp_path / "run" / "logs").glob("rank*.log")}
    assert [name for name, text in sorted(logs.items()) if said in text] == ["rank0"], logs


@pytest.mark.slow
def test_keras_autolog_logs_into_the_jobs_run(sqlite_uri: str, tmp_path: Path) -> None:
    """``mlflow.keras.autolog()`` starts and ends a run around ``fit`` on every rank: the job's run,
    with rank 0's epochs only."""
    proc = _framework_job(tmp_path, sqlite_uri, KERAS)
    assert proc.returncode == 0, explain(proc)
    runs = runs_of(sqlite_uri, "keras-autolog")
    assert len(runs) == 1 and runs[0].info.status == "FINISHED"
    run = runs[0]
    losses = MlflowClient(sqlite_uri).get_metric_history(run.info.run_id, "loss")
    assert sorted(m.step for m in losses) == [0, 1] and all(m.value < 50 for m in losses), losses  # rank 1's ~100
    assert run.data.params["epochs"] == "2" and run.data.params["optimizer_name"] == "sgd"


TF_KERAS = SPEC.parent.parent / "tfkeras" / "component.yaml"


@pytest.mark.slow
def test_tensorflow_autolog_under_two_workers_logs_one_model(sqlite_uri: str, tmp_path: Path) -> None:
    """Real TensorFlow: 2 MultiWorkerMirroredStrategy workers fit under ``mlflow.tensorflow.autolog()``,
    which logs a model on every worker; the job's run holds rank 0's alone (one model named ``model``)."""
    proc = _framework_job(tmp_path, sqlite_uri, TF_KERAS)
    assert proc.returncode == 0, explain(proc)
    runs = runs_of(sqlite_uri, "tf-keras-autolog")
    assert len(runs) == 1 and runs[0].info.status == "FINISHED"
    client = MlflowClient(sqlite_uri)
    models = client.search_logged_models([runs[0].info.experiment_id])
    assert [(m.name, m.source_run_id) for m in models] == [("model", runs[0].info.run_id)], models
    assert len(client.get_metric_history(runs[0].info.run_id, "loss")) == 2  # rank 0's epochs alone
