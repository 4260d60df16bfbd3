"""A function component (``@distcomp.component``) across the two nodes of a real Ray cluster,
as a user submits it: ``distcomp submit proj/train.py:train --target ray --nodes 2``. Its project
(the module and the sibling module it imports) goes as the job's working_dir; a rank on each Ray
node in one gloo world, each value with its Python type, one MLflow run with rank 0's metrics
and the function's parameters."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mlflow import MlflowClient

from ...function.cluster import NASTY, check_typed, ranks, write_project
from .conftest import distcomp, ray_env


@pytest.mark.slow
def test_a_function_runs_across_both_ray_nodes_in_one_mlflow_run(ray_cluster: str, tmp_path: Path) -> None:
    write_project(tmp_path)
    env = ray_env(ray_cluster, tmp_path)
    out = tmp_path / "out"
    proc = distcomp(env, "submit", "proj/train.py:train", "--target", "ray", "--nodes", "2", "-i", "epochs=3",
                    "-i", "amp=true", "-i", f"note={NASTY}", "--output", f"result={out}", "--experiment", "fn-ray",
                    cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    job = proc.stdout.strip()
    got = ranks(out)
    assert [r["rank"] for r in got] == [0, 1] and sorted(r["node"] for r in got) == ["n1", "n2"]  # one per Ray node
    for r in got:
        check_typed(r, 3, True, NASTY)
    assert not list(tmp_path.rglob("pwned"))
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("fn-ray")
    assert experiment is not None
    (run,) = client.search_runs([experiment.experiment_id])
    assert {r["run_id"] for r in got} == {run.info.run_id}
    assert run.info.status == "FINISHED" and run.data.metrics["all_reduce"] == 3.0 and run.data.metrics["loss"] == 0.5 / 3
    params = run.data.params
    assert (params["epochs"], params["lr"], params["amp"], params["note"]) == ("3", "0.5", "True", NASTY)
    assert run.data.tags["distcomp.component"] == "fn-nodes" and run.data.tags["distcomp.job"] == job
    status = distcomp(env, "status", job, "--json")
    assert json.loads(status.stdout)["state"] == "succeeded", status.stdout + status.stderr


def test_the_function_project_goes_as_the_working_dir_and_ignored_files_stay_home(tmp_path: Path) -> None:
    """Compiled (pure): the working_dir is the project folder; what .gitignore leaves out Ray
    leaves out itself, what .distcompignore leaves out is in the excludes."""
    proj = write_project(tmp_path)
    env = ray_env("http://127.0.0.1:9", tmp_path)
    proc = distcomp(env, "compile", "proj/train.py:train", "--target", "ray", "--output", "result=/shared/out",
                    cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    data = json.loads(proc.stdout)
    runtime_env = data["runtime_env"]
    assert runtime_env["working_dir"] == str(proj)
    assert runtime_env["excludes"][-1:] == ["notes.txt"]  # proj/.distcompignore's line
    argv = data["node_record"]["command"]
    assert argv[:4] == ["python", "-m", "distcomp.function.run", "train:train"]
