"""A function component on 2 local ranks, from Python and from the CLI: typed values on every
rank, one MLflow run with rank 0's metrics and the function's parameters as params, a raising
function's traceback as the root cause, and an export that validates and runs the same."""

from __future__ import annotations

import pytest
import json
import time
from pathlib import Path
from typing import Any

from mlflow import MlflowClient

from .conftest import NASTY, distcomp, explain, python, ranks


def _only_run(uri: str, experiment: str):  # type: ignore[no-untyped-def]
    client = MlflowClient(uri)
    exp = client.get_experiment_by_name(experiment)
    assert exp is not None
    runs = client.search_runs([exp.experiment_id])
    assert len(runs) == 1, [r.info.run_id for r in runs]
    return runs[0]


def _typed(got: dict[str, Any], note: str, epochs: int, amp: bool) -> None:
    assert got["epochs"] == [epochs, "int"]  # 4, not "4"
    assert got["lr"] == [0.5, "float"]
    assert got["amp"] == [amp, "bool"]
    assert got["mode"] == ["ok", "str"]
    assert got["note"] == [note, "str"]  # exactly as given: quotes, spaces, $(...), backticks
    assert got["data"] == [None, "NoneType"]  # an optional input left out
    assert got["out_type"] == "Output" and got["world"] == 2 and got["env"] == "yes"


@pytest.mark.slow
def test_from_python_two_ranks_typed_values_and_one_mlflow_run(project: Path, sqlite_uri: str, tmp_path: Path) -> None:
    out, run_dir = tmp_path / "out", tmp_path / "run"
    script = tmp_path / "driver.py"
    script.write_text(f"""
import json, sys
sys.path.insert(0, {str(project)!r})
import distcomp
from train import train

if __name__ == "__main__":
    outcome = distcomp.run(train, inputs={{"epochs": 4, "amp": True, "note": {NASTY!r}}},
                           outputs={{"out": {str(out)!r}}}, run_dir={str(run_dir)!r}, experiment="fn-py")
    print(json.dumps({{"state": outcome.state.value, "exit": outcome.exit_code, "run": outcome.tracking.run_id}}))
""", encoding="utf-8")
    proc = python(tmp_path, f"import runpy; runpy.run_path({str(script)!r}, run_name='__main__')", uri=sqlite_uri)
    assert proc.returncode == 0, explain(proc)
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["state"] == "succeeded" and result["exit"] == 0
    got = ranks(out)
    for r in (0, 1):
        _typed(got[r], NASTY, 4, True)
        assert got[r]["cwd"] == str(project)  # the rank runs in the code folder
    assert not list(tmp_path.rglob("pwned"))
    run = _only_run(sqlite_uri, "fn-py")
    assert run.info.run_id == result["run"] and run.info.status == "FINISHED"
    history = MlflowClient(sqlite_uri).get_metric_history(run.info.run_id, "loss")
    assert sorted((m.step, m.value) for m in history) == [(s, 0.5 / (s + 1)) for s in range(4)]  # rank 0's only
    params = run.data.params
    assert params["epochs"] == "4" and params["amp"] == "True" and params["lr"] == "0.5" and params["mode"] == "ok"
    assert run.data.tags["distcomp.component"] == "fn-probe"
    # the return value is dropped, with a warning in each rank's log
    assert "train:train returned int 4" in (run_dir / "logs" / "rank0.log").read_text(encoding="utf-8")


def test_from_the_cli_same_values(project: Path, sqlite_uri: str, tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = distcomp(tmp_path, "run", "proj/train.py:train", "-i", "epochs=3", "-i", f"note={NASTY}", "-i", "amp=false",
                    "-o", f"out={out}", "--run-dir", str(tmp_path / "run"), "--experiment", "fn-cli", uri=sqlite_uri)
    assert proc.returncode == 0, explain(proc)
    assert "Traceback" not in proc.stderr
    got = ranks(out)
    for r in (0, 1):
        _typed(got[r], NASTY, 3, False)
    run = _only_run(sqlite_uri, "fn-cli")
    assert run.info.status == "FINISHED" and run.data.params["epochs"] == "3"
    assert len(run.data.tags["distcomp.spec_sha256"]) == 64  # the hash of the spec file the job ran
    assert len(MlflowClient(sqlite_uri).get_metric_history(run.info.run_id, "loss")) == 3


@pytest.mark.slow
def test_submitted_in_the_background_the_worker_loads_the_function_again(project: Path, sqlite_uri: str,
                                                                         tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = distcomp(tmp_path, "submit", "proj/train.py:train", "--target", "local", "-i", "epochs=2", "-i",
                    f"note={NASTY}", "-o", f"out={out}", "--run-dir", str(tmp_path / "run"), uri=sqlite_uri)
    assert proc.returncode == 0, explain(proc)
    job = proc.stdout.strip()
    deadline = time.monotonic() + 120  # a bound on the wait, not a timing assertion
    state = ""
    while time.monotonic() < deadline:
        state = json.loads(distcomp(tmp_path, "status", job, "--json", uri=sqlite_uri).stdout)["state"]
        if state not in ("pending", "running"):
            break
        time.sleep(0.5)
    assert state == "succeeded", explain(distcomp(tmp_path, "logs", job, uri=sqlite_uri))
    # the record names the function's spec file (in distcomp's cache), whose code is the project
    record = json.loads((tmp_path / "run" / "job.json").read_text())
    assert record["spec"].endswith("/component.yaml") and f"code: {project}" in Path(record["spec"]).read_text()
    got = ranks(out)
    for r in (0, 1):
        _typed(got[r], NASTY, 2, False)


def test_a_raising_function_fails_with_its_traceback_as_the_root_cause(project: Path, tmp_path: Path) -> None:
    proc = distcomp(tmp_path, "run", "proj/train.py:train", "-i", "mode=fail", "-i", "note=boom",
                    "-o", f"out={tmp_path / 'out'}", "--run-dir", str(tmp_path / "run"), "--no-tracking", "--quiet")
    assert proc.returncode == 1, explain(proc)
    status = json.loads((tmp_path / "run" / "status.json").read_text(encoding="utf-8"))
    cause = status["root_cause"]
    assert cause["name"] == "rank1" and cause["returncode"] == 1
    tail = "\n".join(cause["tail"])
    assert "RuntimeError: rank 1 fails on purpose: boom" in tail and 'train.py", line' in tail and "in train" in tail
    assert "distcomp/function/run.py" not in tail  # the runner's own frames are left out
    assert "RuntimeError: rank 1 fails on purpose: boom" in proc.stderr  # the report the user reads


@pytest.mark.slow
def test_export_validates_and_runs_the_same(project: Path, tmp_path: Path) -> None:
    exported = tmp_path / "exported"
    proc = python(tmp_path, f"""
import sys
sys.path.insert(0, {str(project)!r})
import distcomp
from train import train
distcomp.export(train, {str(exported)!r})
""")
    assert proc.returncode == 0, explain(proc)
    files = sorted(p.relative_to(exported).as_posix() for p in exported.rglob("*") if p.is_file())
    # .gitignore'd (*.ckpt, scratch/) and .distcompignore'd (notes.txt) files stay home
    assert files == [".distcomp-made",  # the marker force=True looks for
                     "code/.distcompignore", "code/.gitignore", "code/helpers.py", "code/train.py", "component.yaml"]
    check = distcomp(tmp_path, "validate", str(exported / "component.yaml"))
    assert check.returncode == 0 and "ok: fn-probe@1.0.0 (torch.distributed, 1 node x 2 processes)" in check.stdout
    results = {}
    for name, spec in (("yaml", str(exported / "component.yaml")), ("function", "proj/train.py:train")):
        out = tmp_path / f"out-{name}"
        run = distcomp(tmp_path, "run", spec, "-i", "epochs=2", "-i", f"note={NASTY}", "-o", f"out={out}",
                       "--run-dir", str(tmp_path / f"run-{name}"), "--no-tracking")
        assert run.returncode == 0, explain(run)
        results[name] = {r: {k: v for k, v in got.items() if k != "cwd"} for r, got in ranks(out).items()}
    assert results["yaml"] == results["function"]
    _typed(results["yaml"][0], NASTY, 2, False)
    # the same text both ways: the export's spec is the function's, its code folder aside
    again = python(tmp_path, f"""
import sys
sys.path.insert(0, {str(project)!r})
from train import train
sys.stdout.write(train.spec_text("code"))
""")
    assert again.stdout == (exported / "component.yaml").read_text(encoding="utf-8")
    # a second export into the folder is refused, nothing changed; force replaces it
    refused = _export(tmp_path, project, "train", exported)
    assert "the folder is not empty" in refused.stdout and "force=True" in refused.stdout


def _export(tmp_path: Path, project: Path, module: str, exported: Path) -> Any:
    """``distcomp.export`` of the function ``module`` of the project's module ``module``, in a fresh process; a refusal is printed."""
    return python(tmp_path, f"""
import sys
sys.path.insert(0, {str(project)!r})
import distcomp
from distcomp.errors import UsageError
from {module} import {module}
try:
    distcomp.export({module}, {str(exported)!r})
except UsageError as exc:
    print(exc)
""")


def test_a_refused_export_writes_nothing(project: Path, tmp_path: Path) -> None:
    # a launcher that is not installed passes decoration (a name) and is refused by the loader:
    # before any folder is made or file copied: nothing is left where the export was to go
    (project / "odd.py").write_text("import distcomp\n\n\n@distcomp.component(launcher='no-such-launcher')\n"
                                    "def odd(epochs: int = 1):\n    pass\n", encoding="utf-8")
    exported = tmp_path / "out" / "exported"
    proc = _export(tmp_path, project, "odd", exported)
    assert proc.returncode == 0, explain(proc)
    assert "export of odd:odd" in proc.stdout and "no-such-launcher" in proc.stdout
    assert len(proc.stdout.strip().splitlines()) == 1
    assert not exported.parent.exists()
