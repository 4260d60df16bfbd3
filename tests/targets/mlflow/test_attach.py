"""``distcomp run`` given a run (``MLFLOW_RUN_ID``, as an MLflow Project starts it) adds to it:
the creator's ``mlflow.source.*`` and ``mlflow.user`` tags stay, params it already has are not
logged again (they are immutable), the ones it lacks are added."""

from __future__ import annotations

from pathlib import Path

import pytest
from mlflow import MlflowClient

from distcomp.mlstore._client import ClientStore
from distcomp.mlstore._rest import RestStore
from distcomp.mlstore._sqlite import SqliteStore

from ._helpers import clean_env, distcomp, explain

TRACKING_PROBE = Path(__file__).resolve().parents[2] / "tracking" / "jobs" / "probe" / "torch.yaml"
OWNER = {"mlflow.source.type": "PROJECT", "mlflow.source.name": "/somewhere/project", "mlflow.user": "alice"}


@pytest.fixture(params=["sqlite", "server"])
def store(request: pytest.FixtureRequest) -> str:
    return request.getfixturevalue("sqlite_uri" if request.param == "sqlite" else "mlflow_server")


@pytest.mark.slow
def test_an_attached_job_keeps_the_owners_tags_and_params(store: str, tmp_path: Path) -> None:
    client = MlflowClient(store)
    outer = client.create_run(client.create_experiment(f"outer-{tmp_path.name}"), tags=OWNER)
    client.log_param(outer.info.run_id, "linger", "0")  # as `mlflow run -P linger=0` logs it
    (tmp_path / "state").mkdir()
    proc = distcomp("run", str(TRACKING_PROBE), "--quiet", "--nproc-per-node", "1", "--run-dir", str(tmp_path / "run"),
                    "--input", f"state_dir={tmp_path / 'state'}", "--input", "linger=0.0", cwd=tmp_path,
                    env=clean_env(MLFLOW_TRACKING_URI=store, MLFLOW_RUN_ID=outer.info.run_id))
    assert proc.returncode == 0, explain(proc)
    assert "warning" not in proc.stderr  # no param logged over another value
    run = client.get_run(outer.info.run_id)
    assert run.info.status == "FINISHED"
    assert {k: run.data.tags[k] for k in OWNER} == OWNER
    assert run.data.tags["distcomp.component"] == "tracking-probe" and run.data.tags["distcomp.world_size"] == "1"
    assert run.data.params["linger"] == "0"  # the owner's, not distcomp's "0.0"
    assert run.data.params["mode"] == "ok" and run.data.params["bad_rank"] == "2"  # what the run lacked


@pytest.mark.slow
def test_every_store_reads_a_runs_tags_and_params(sqlite_uri: str, mlflow_server: str) -> None:
    for uri, stores in ((sqlite_uri, (SqliteStore(sqlite_uri), ClientStore(sqlite_uri))),
                        (mlflow_server, (RestStore(mlflow_server, {}), ClientStore(mlflow_server)))):
        client = MlflowClient(uri)
        run = client.create_run(client.create_experiment("data"), tags={"a": "1", "b": ""})
        client.log_param(run.info.run_id, "p", "x y")
        for s in stores:
            data = s.run_data(run.info.run_id)
            assert {k: data.tags[k] for k in ("a", "b")} == {"a": "1", "b": ""}, type(s).__name__
            assert data.params == {"p": "x y"}, type(s).__name__


def test_input_if_set_treats_an_empty_value_as_not_given(tmp_path: Path) -> None:
    from ._helpers import PROBE

    both = distcomp("run", str(PROBE), "--no-tracking", "--input", "tag=a", "--input-if-set", "tag=b", cwd=tmp_path)
    assert both.returncode == 2 and "input tag is given by both --input and --input-if-set" in both.stderr
    bad = distcomp("run", str(PROBE), "--no-tracking", "--input", "tag=a", "--input-if-set", "fail_rank=x",
                   cwd=tmp_path)
    assert bad.returncode == 2 and "input 'fail_rank' must be an integer" in bad.stderr, explain(bad)
    missing = distcomp("run", str(PROBE), "--no-tracking", "--input-if-set", "tag=", cwd=tmp_path)
    assert missing.returncode == 2 and "missing required input 'tag'" in missing.stderr, explain(missing)
    assert "Traceback" not in both.stderr + bad.stderr + missing.stderr
    assert not (tmp_path / "runs").exists()
