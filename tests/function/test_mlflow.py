"""A function component as an MLflow project: ``distcomp compile proj/train.py:train --target
mlflow`` writes one folder (its spec with ``code: code``, the project as ``code/``), and the
real ``mlflow run -b distcomp`` runs it on 2 ranks in one run holding rank 0's metrics."""

from __future__ import annotations

import pytest
import json
from pathlib import Path

from mlflow import MlflowClient

from ..targets.mlflow._helpers import mlflow_run, only_run
from .conftest import distcomp, explain, ranks


@pytest.mark.slow
def test_it_compiles_to_one_folder_that_mlflow_run_runs_in_one_run(project: Path, sqlite_uri: str,
                                                                   tmp_path: Path) -> None:
    proc = distcomp(tmp_path, "compile", "proj/train.py:train", "--target", "mlflow", "--out", "mlproj")
    assert proc.returncode == 0, explain(proc)
    out = tmp_path / "mlproj"
    shipped = {str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()}
    # the project travels whole (the sibling module too), less what .gitignore/.distcompignore leave out
    assert {"MLproject", "component.yaml", "distcomp-job.json", "code/train.py", "code/helpers.py"} <= shipped
    assert not {"code/model.ckpt", "code/notes.txt", "code/scratch/tmp.py"} & shipped
    assert "code: code\n" in (out / "component.yaml").read_text(encoding="utf-8")
    proc = mlflow_run(out, sqlite_uri, tmp_path, "epochs=2", "note=from mlflow")
    assert proc.returncode == 0, explain(proc)
    written = next(out.glob("runs/*/outputs/out"))  # a local run writes its outputs in its run folder
    got = ranks(written)
    for r in (0, 1):
        assert got[r]["epochs"] == [2, "int"] and got[r]["note"] == ["from mlflow", "str"]
        assert got[r]["world"] == 2
    run = only_run(sqlite_uri)
    assert run.info.status == "FINISHED" and run.data.params["epochs"] == "2"
    history = MlflowClient(sqlite_uri).get_metric_history(run.info.run_id, "loss")
    assert sorted((m.step, m.value) for m in history) == [(s, 0.5 / (s + 1)) for s in range(2)]  # rank 0's only
    assert json.loads((out / "distcomp-job.json").read_text(encoding="utf-8"))["spec"] == "component.yaml"
