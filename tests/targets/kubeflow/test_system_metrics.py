"""Every node's system metrics in the job's one MLflow run on Kubeflow (issue 37): the node
agent in each pod samples its pod's node, named by the pod's host name, while the job is
tracked. The compiled PyTorchJob's pods run here under the emulated operator (``_operator``),
their real commands, with the job's MLflow run bound as submit binds it (``_bind.bind_run``),
into a real SQLite store."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from mlflow import MlflowClient

from distcomp.core.hookspec import DistcompSpecs
from distcomp.records import TrackingRef
from distcomp.targets.kubeflow._bind import bind_run

from ..._dists import install
from ...test_plugins import example_code
from ._operator import LOCALHOST, pytorchjob_pods, run_pods

RANK = "import os, time; print(f\"rank {os.environ['MY_RANK']} up\", flush=True); time.sleep(4)\n"


def _compile(tmp_path: Path, *flags: str) -> tuple[dict[str, Any], Path]:
    """A 2-node job of a launcher with no Kubeflow mapping of its own: one agent per pod."""
    site = tmp_path / "site"
    install(site, "mypkg", "mypkg", example_code(DistcompSpecs.distcomp_launchers.__doc__ or ""),
            "[distcomp]\nmine = mypkg\n")
    code = tmp_path / "code"
    code.mkdir()
    (code / "rank.py").write_text(RANK)
    (code / "component.yaml").write_text("name: mine-job\ntype: DistributedComponent\n"
                                         "launcher:\n  type: mine\n  additional_arguments: python rank.py\n")
    proc = subprocess.run([sys.executable, "-m", "distcomp", "compile", "--target", "kubeflow",
                           str(code / "component.yaml"), "--nodes", "2", "--image", "python:3.11", "--code", "image",
                           *flags], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(site)})
    assert proc.returncode == 0, proc.stderr
    return yaml.safe_load(proc.stdout), code


def _run(uri: str) -> TrackingRef:
    client = MlflowClient(uri)
    experiment = client.create_experiment("kubeflow-sysmetrics")
    run = client.create_run(experiment)
    return TrackingRef(run.info.run_id, uri, experiment)


@pytest.mark.slow
def test_each_pod_s_agent_samples_its_node_into_the_job_s_run(tmp_path: Path) -> None:
    manifest, code = _compile(tmp_path, "--system-metrics-interval", "1")
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    ref = _run(uri)
    bound, found = bind_run(manifest, {"MLFLOW_RUN_ID": ref.run_id, "MLFLOW_TRACKING_URI": uri,
                                       "DISTCOMP_MLFLOW_RUN_ID": ref.run_id}, ref)
    assert found
    pods = [p.with_env(MASTER_ADDR=LOCALHOST) for p in pytorchjob_pods(bound)]
    done = run_pods(pods, code, tmp_path / "logs", timeout=120)
    assert set(done.codes.values()) == {0}, done.explain()
    metrics = MlflowClient(uri).get_run(ref.run_id).data.metrics
    nodes = sorted({k.split("/")[1] for k in metrics if k.startswith("system/")})
    assert nodes == sorted(p.name for p in pods), (sorted(metrics), done.explain())
    for node in nodes:
        assert {f"system/{node}/cpu_utilization_percentage", f"system/{node}/system_memory_usage_megabytes"} <= set(
            metrics)
    assert "system metrics" not in "".join(p.output for p in done.pods)  # nothing went wrong: nothing said


@pytest.mark.slow
def test_an_untracked_job_or_no_system_metrics_samples_nothing(tmp_path: Path) -> None:
    manifest, code = _compile(tmp_path)
    pods = [p.with_env(MASTER_ADDR=LOCALHOST) for p in pytorchjob_pods(manifest)]  # no run bound
    done = run_pods(pods, code, tmp_path / "logs", timeout=120)
    assert set(done.codes.values()) == {0}, done.explain()
    assert "system metrics" not in "".join(p.output for p in done.pods)
    off, _code = _compile(tmp_path / "off", "--no-system-metrics")
    assert "system_metrics" not in str(off) and "system_metrics" in str(manifest)
