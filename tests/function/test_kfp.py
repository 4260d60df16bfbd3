"""A function component as a KFP step: ``distcomp.kfp.load_component(train, image=...)`` inside a
``@dsl.pipeline``, after a plain KFP component whose Dataset feeds the function's optional
``data`` input. KFP's compiler accepts the pipeline, and kfp.local (SubprocessRunner, no venv)
runs it: the step unpacks the embedded code (the project less what its ignore files leave out),
starts 2 ranks, each calling the function with its values converted back to their types, and
one MLflow run holds rank 0's metrics and the function's parameters."""

from __future__ import annotations

import pytest
import json
import re
import subprocess
import sys
from pathlib import Path

import yaml
from mlflow import MlflowClient

from ..targets._jobs import clean_env
from ..targets.kfp.test_local_runs import _bundle_names
from .conftest import NASTY, WAIT, ranks

PIPELINE = '''\
import json, sys
sys.path.insert(0, {project!r})
from kfp import compiler, dsl, local
import distcomp.kfp
from train import train

step = distcomp.kfp.load_component(train, image="python:3.11")
distcomp.kfp.compile_component(train, "component.yaml", image="python:3.11")


@dsl.component(base_image="python:3.11")
def make_data(data: dsl.Output[dsl.Dataset]):
    import os
    os.makedirs(data.path, exist_ok=True)


@dsl.pipeline(name="fn-pipeline")
def pipeline(epochs: int = 3, note: str = "plain") -> dsl.Artifact:
    made = make_data()
    return step(data=made.outputs["data"], epochs=epochs, note=note, amp=True).outputs["out"]


compiler.Compiler().compile(pipeline, package_path="pipeline.yaml")
local.init(runner=local.SubprocessRunner(use_venv=False), pipeline_root={root!r}, workspace_root={workspace!r})
out = pipeline(epochs=4, note={note!r}).output
print("OUT " + json.dumps({{"path": out.path, "metadata": out.metadata}}))
'''


@pytest.mark.slow
def test_a_pipeline_kfp_compiles_and_kfp_local_runs(project: Path, tmp_path: Path, sqlite_uri: str) -> None:
    (tmp_path / "pipe.py").write_text(PIPELINE.format(project=str(project), root=str(tmp_path / "root"),
                                                      workspace=str(tmp_path / "ws"), note=NASTY), encoding="utf-8")
    env = clean_env(MLFLOW_TRACKING_URI=sqlite_uri, TMPDIR=str(tmp_path))  # the step unpacks in TMPDIR
    proc = subprocess.run([sys.executable, "pipe.py"], cwd=tmp_path, capture_output=True, text=True, env=env,
                          timeout=WAIT * 2)
    console = re.sub(r"\x1b\[[0-9;]*m", "", proc.stdout + proc.stderr)  # kfp.local colours task names
    assert proc.returncode == 0, console[-4000:]
    assert "Pipeline 'fn-pipeline' finished with status SUCCESS" in console

    # KFP's compiler took it: the upstream Dataset flows into the function's optional input
    tasks = yaml.safe_load((tmp_path / "pipeline.yaml").read_text(encoding="utf-8"))["root"]["dag"]["tasks"]
    assert set(tasks) == {"make-data", "fn-probe"}
    assert tasks["fn-probe"]["inputs"]["artifacts"]["data"] == {
        "taskOutputArtifact": {"outputArtifactKey": "data", "producerTask": "make-data"}}
    # the step carries the project as every delivery ships it: the ignore files' rules hold
    names = _bundle_names(tmp_path / "component.yaml")
    assert {"component.yaml", "code/train.py", "code/helpers.py"} <= set(names)
    assert not {"code/model.ckpt", "code/notes.txt", "code/scratch/tmp.py"} & set(names)

    result = json.loads(console.split("OUT ", 1)[1].splitlines()[0])
    got = ranks(Path(result["path"]))
    data = str(tmp_path / "root")
    for record in got.values():
        assert record["epochs"] == [4, "int"] and record["amp"] == [True, "bool"] and record["lr"] == [0.5, "float"]
        assert record["note"] == [NASTY, "str"]  # exactly as given
        assert record["data"][1] == "Input" and record["data"][0].startswith(data)  # make-data's artifact
        assert record["data"][0].endswith("make-data/data")
        assert record["world"] == 2 and record["env"] == "yes" and record["cwd"].endswith("/code")
    assert result["metadata"]["distcomp.processes"] == 2
    assert not list(tmp_path.rglob("pwned"))

    client = MlflowClient(sqlite_uri)
    experiment = client.get_experiment_by_name("fn-probe")
    assert experiment is not None
    (run,) = client.search_runs([experiment.experiment_id])
    assert run.info.status == "FINISHED" and run.data.params["epochs"] == "4" and run.data.params["amp"] == "True"
    history = client.get_metric_history(run.info.run_id, "loss")
    assert sorted((m.step, m.value) for m in history) == [(s, 0.5 / (s + 1)) for s in range(4)]  # rank 0's only
