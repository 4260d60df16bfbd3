"""The step's job record from the values KFP hands the function (``distcomp.worker`` reads it,
never CLI flags), and the argv distcomp then renders from it: an optional input KFP did not
deliver takes its block away."""

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

from distcomp.core.jobrecord import KEY, VERSION, read_record
from distcomp.spec import bind_inputs, load
from distcomp.targets.kfp._step import step_record
from tests.targets.kfp.conftest import ECHO

TEMPLATE = {KEY: VERSION, "options": {"nproc_per_node": 3}}


def test_values_become_inputs_and_absent_optionals_none(tmp_path: Path) -> None:
    out = SimpleNamespace(path="/kfp/out")
    inputs = {"name": ("string", "a=b c"), "count": ("integer", 7.0), "ratio": ("number", 2),
              "flag": ("boolean", False), "mode": ("enum", "slow"), "fail_rank": ("integer", -1),
              "opt": ("number", None), "extra": ("port", None)}
    record = step_record("/b/component.yaml", "/b/run", inputs, {"out": out}, TEMPLATE, False)
    (tmp_path / "job.json").write_text(json.dumps(record))
    read = read_record(tmp_path / "job.json")  # what the worker reads: a valid record of this format
    assert (read.action, read.spec) == ("run", "/b/component.yaml")
    assert dict(read.options) == {"nproc_per_node": 3, "run_dir": "/b/run", "tracking": False}
    assert dict(read.inputs) == {"name": "a=b c", "count": "7", "ratio": "2.0", "flag": "false", "mode": "slow",
                                 "fail_rank": "-1"}
    assert dict(read.outputs) == {"out": "/kfp/out"}

    spec = load(ECHO)
    rendered = spec.render(bind_inputs(spec, dict(read.inputs)), {"out": "/kfp/out"})
    assert rendered == ["python", "echo.py", "--name", "a=b c", "--count", "7", "--ratio", "2.0", "--flag", "False",
                        "--mode", "slow", "--fail-rank", "-1", "--out", "/kfp/out"]


def test_delivered_optionals_bring_their_blocks(tmp_path: Path) -> None:
    inputs = {"name": ("string", "x"), "opt": ("number", 0.5), "extra": ("port", SimpleNamespace(path=str(tmp_path)))}
    record = step_record("s.yaml", "run", inputs, {}, TEMPLATE, True, "pipelines")
    assert record["options"]["tracking"] is True and record["options"]["experiment"] == "pipelines"
    spec = load(ECHO)
    rendered = spec.render(bind_inputs(spec, record["inputs"]), {"out": "/o"})
    assert rendered[-6:] == ["--opt", "0.5", "--extra", str(tmp_path), "--out", "/o"]


def test_a_pipeline_compiled_by_a_newer_distcomp_is_refused_with_what_to_do(tmp_path: Path) -> None:
    record = step_record(str(tmp_path / "component.yaml"), str(tmp_path / "run"), {}, {},
                         {KEY: VERSION + 1, "options": {}}, False)
    (tmp_path / "job.json").write_text(json.dumps(record))
    done = subprocess.run([sys.executable, "-m", "distcomp.worker", str(tmp_path / "job.json")], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2 and "written by a newer distcomp" in done.stderr
    assert not (tmp_path / "run").exists()
