"""Issue 36 on KFP: ``max_restarts`` (``--max-restarts``, ``load_component(max_restarts=K)`` or the
spec's ``launcher.max_restarts``) is the task's retry policy, which KFP's own compiler writes as
``retryPolicy.maxRetryCount``: a retry runs the whole step again (every rank of its node, or the
whole Kubeflow job of several), the contract's restart; the step then restarts nothing itself."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from kfp import compiler, dsl
from kfp.components import load_component_from_file

import distcomp
from distcomp.kfp import compile_component, load_component

from .conftest import ECHO

ALLREDUCE = Path(__file__).resolve().parent / "jobs" / "allreduce" / "component.yaml"


def retries(path: Path) -> dict[str, Any]:
    """Each task of the compiled file's root DAG -> its retryPolicy (absent: none)."""
    doc = yaml.safe_load(path.read_text())
    return {name: task.get("retryPolicy") for name, task in doc["root"]["dag"]["tasks"].items()}


def test_the_cli_writes_the_retry_policy_and_says_so(tmp_path: Path) -> None:
    out = tmp_path / "c.yaml"
    proc = subprocess.run([sys.executable, "-m", "distcomp", "compile", "--target", "kfp", str(ECHO), "--image", "i:1",
                           "--max-restarts", "2", "--out", str(out)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    (policy,) = retries(out).values()
    assert policy == {"maxRetryCount": 2, "backoffDuration": "0s", "backoffFactor": 2.0,
                      "backoffMaxDuration": "3600s"}  # what task.set_retry(num_retries=2) writes
    assert "retries a failed step up to 2 time(s)" in proc.stderr and "task.set_retry(num_retries=2)" in proc.stderr
    assert load_component_from_file(str(out)).name == "kfp-echo"  # still a component KFP loads
    plain = tmp_path / "plain.yaml"
    proc = subprocess.run([sys.executable, "-m", "distcomp", "compile", "--target", "kfp", str(ECHO), "--image", "i:1",
                           "--out", str(plain)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert list(retries(plain).values()) == [None] and "retries" not in proc.stderr


def test_the_spec_gives_it_and_the_flag_overrides_it(tmp_path: Path) -> None:
    text = ECHO.read_text()
    spec = tmp_path / "component.yaml"
    spec.write_text(text.replace("\nlauncher:\n", "\nlauncher:\n  max_restarts: 3\n"))
    (tmp_path / "echo.py").write_text((ECHO.parent / "echo.py").read_text())
    distcomp.compile(str(spec), "kfp", image="i:1").write(tmp_path / "a.yaml")
    assert [p["maxRetryCount"] for p in retries(tmp_path / "a.yaml").values()] == [3]
    # the step's own run restarts nothing (the spec's 3 would, on top of the 3 retries)
    (executor,) = yaml.safe_load((tmp_path / "a.yaml").read_text())["deploymentSpec"]["executors"].values()
    assert "{'distcomp_job': 1, 'options': {'max_restarts': 0}}" in max(executor["container"]["command"], key=len)
    distcomp.compile(str(spec), "kfp", image="i:1", max_restarts=0).write(tmp_path / "b.yaml")
    assert list(retries(tmp_path / "b.yaml").values()) == [None]


def test_a_pipelines_task_of_the_component_retries(tmp_path: Path) -> None:
    train = load_component(ECHO, max_restarts=4)
    source = max(train.component_spec.implementation.container.command, key=len)
    assert "'max_restarts'" not in source  # the step restarts nothing itself: the retry is the restart

    @dsl.pipeline(name="retrying")
    def pipeline():  # type: ignore[no-untyped-def]  # kfp reads "-> None" as an output
        train(name="x")
        load_component(ECHO)(name="y")  # no max_restarts: no retry

    compiler.Compiler().compile(pipeline, package_path=str(tmp_path / "p.yaml"))
    tasks = {name: (p or {}).get("maxRetryCount") for name, p in retries(tmp_path / "p.yaml").items()}
    assert sorted(tasks.values(), key=str) == [4, None], tasks
    compile_component(ECHO, tmp_path / "c.yaml", max_restarts=4)
    assert [p["maxRetryCount"] for p in retries(tmp_path / "c.yaml").values()] == [4]


def test_several_nodes_retry_the_whole_job(tmp_path: Path) -> None:
    train = load_component(ALLREDUCE, nodes=2, image="i:1", shared_volume=("shared-data", "/mnt"), max_restarts=2)
    source = max(train.component_spec.implementation.container.command, key=len)
    # the step submits the job with no restarts of its own (not the spec's either): its retry is the restart
    assert "'image': 'i:1', 'max_restarts': 0}}" \
        in source
    compile_component(ALLREDUCE, tmp_path / "c.yaml", nodes=2, image="i:1", shared_volume=("shared-data", "/mnt"),
                      max_restarts=2)
    assert [p["maxRetryCount"] for p in retries(tmp_path / "c.yaml").values()] == [2]


@pytest.mark.parametrize("bad", [-1, 1.5, True])
def test_a_bad_count_is_a_clear_error(bad: Any) -> None:
    with pytest.raises(distcomp.kfp.KfpTargetError, match=r"max_restarts must be a whole number"):
        load_component(ECHO, max_restarts=bad)
