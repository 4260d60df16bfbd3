"""A function component (``@distcomp.component``) across the two nodes of the real Slurm
cluster, from Python (``distcomp.submit(train, "slurm")``) and from the CLI
(``distcomp submit proj/train.py:train --target slurm``), and through ``--code-store``: a rank on
n1 and one on n2 in one gloo world, each value with its Python type, the sibling module and no
ignored file shipped, one MLflow run with rank 0's metrics and the function's params."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest

import distcomp
from distcomp.records import JobState
from tests._s3server import S3Server

from .._jobs import clean_env
from ...function.cluster import NASTY, SHIPPED, check_typed, ranks, write_project


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return write_project(tmp_path)


@pytest.fixture
def train(project: Path) -> Iterator[Any]:
    """The user's function, imported as a user's script imports it (its folder on sys.path)."""
    sys.path.insert(0, str(project))
    try:
        yield importlib.import_module("train").train
    finally:
        sys.path.remove(str(project))
        for name in ("train", "helpers"):
            sys.modules.pop(name, None)


def _run(store: str, run_id: str):  # type: ignore[no-untyped-def]
    from mlflow import MlflowClient

    return MlflowClient(store).get_run(run_id)


def _check_job(outcome: distcomp.JobOutcome, store: str, epochs: int, amp: bool, note: str) -> list[dict[str, Any]]:
    assert outcome.state is JobState.SUCCEEDED and outcome.exit_code == 0, outcome.root_cause + outcome.message
    got = ranks(Path(outcome.outputs["result"]))
    assert [(r["rank"], r["node"]) for r in got] == [(0, "n1"), (1, "n2")]  # one world across both Slurm nodes
    for r in got:
        check_typed(r, epochs, amp, note)
    assert outcome.tracking is not None and {r["run_id"] for r in got} == {outcome.tracking.run_id}
    run = _run(store, outcome.tracking.run_id)
    assert run.info.status == "FINISHED" and run.data.metrics["all_reduce"] == 3.0
    assert run.data.metrics["loss"] == 0.5 / epochs  # rank 0's last step
    params = run.data.params
    assert (params["epochs"], params["lr"], params["amp"], params["note"]) == (str(epochs), "0.5", str(amp), note)
    assert run.data.tags["distcomp.component"] == "fn-nodes" and run.data.tags["distcomp.world_size"] == "2"
    return got


@pytest.mark.slow
def test_a_function_runs_across_both_nodes_from_python(train: Any, job_dir: Path, tmp_path: Path) -> None:
    job = distcomp.submit(train, "slurm", nodes=2, job_dir=str(job_dir), experiment="fn-slurm",
                          inputs={"epochs": 3, "amp": True, "note": NASTY})
    outcome = job.wait()
    _check_job(outcome, f"sqlite:///{job_dir}/mlflow.db", 3, True, NASTY)
    folder = Path(outcome.details["folder"])
    # the ranks ran in the job's own snapshot of the project, not in the working copy
    assert sorted(p.name for p in (folder / "code").iterdir() if p.name != "__pycache__") == SHIPPED
    assert not list(tmp_path.rglob("pwned")) and not list(folder.rglob("pwned"))


@pytest.mark.slow
def test_a_function_runs_across_both_nodes_from_the_cli(project: Path, slurm_cluster: Path, tmp_path: Path) -> None:
    jobs = tmp_path / "jobs"
    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    proc = subprocess.run([sys.executable, "-m", "distcomp", "submit", "proj/train.py:train", "--target", "slurm",
                           "--nodes", "2", "--job-dir", str(jobs), "-i", "epochs=2", "-i", f"note={NASTY}",
                           "--output", f"result={tmp_path / 'out'}"],
                          cwd=tmp_path, env=clean_env(MLFLOW_TRACKING_URI=store), capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    (folder,) = [p for p in jobs.iterdir() if p.name.startswith("fn-nodes-")]
    record = json.loads((folder / "job.json").read_text())
    outcome = distcomp.job(f"slurm:{record['slurm_job_id']}").wait()
    assert outcome.outputs["result"] == str(tmp_path / "out")
    _check_job(outcome, store, 2, False, NASTY)


@pytest.mark.slow
def test_a_function_runs_from_the_code_store_on_both_nodes(train: Any, project: Path, slurm_cluster: Path,
                                                           s3_server: S3Server, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Nodes that do not see the project: it goes through the store, the same files as a copy."""
    import shutil

    for name, value in s3_server.env().items():
        monkeypatch.setenv(name, value)
    job_dir = tmp_path / "jobs"
    prefix = f"fn-{tmp_path.name}"
    job = distcomp.submit(train, "slurm", nodes=2, job_dir=str(job_dir), inputs={"note": NASTY},
                          code_store=f"s3://{s3_server.bucket}/{prefix}")
    shutil.rmtree(project)  # the project is gone from this machine: only the store has it now
    outcome = job.wait()
    _check_job(outcome, f"sqlite:///{job_dir}/mlflow.db", 2, False, NASTY)
    folder = Path(outcome.details["folder"])
    assert not (folder / "code").exists()
    (key,) = [o["Key"] for o in s3_server.boto3().list_objects_v2(Bucket=s3_server.bucket,
                                                                  Prefix=f"{prefix}/")["Contents"]]
    assert key.startswith(f"{prefix}/code/sha256-")
    import io
    import tarfile

    body = s3_server.boto3().get_object(Bucket=s3_server.bucket, Key=key)["Body"].read()
    with tarfile.open(fileobj=io.BytesIO(body)) as archive:
        names = sorted(m.name for m in archive.getmembers() if m.isfile())
    assert names == SHIPPED
