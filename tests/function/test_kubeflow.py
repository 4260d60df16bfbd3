"""A function component compiled for Kubeflow, from Python (``distcomp.compile(train, "kubeflow")``)
and from the CLI (``distcomp compile proj/train.py:train --target kubeflow``): the same manifest,
valid against the training operator's real CRD, its code (the function's module and the sibling
it imports, not what .gitignore or .distcompignore leave out) in the ConfigMap. Then each pod's
real command runs here as the operator and the kubelet would start it (tests/targets/kubeflow:
``_operator``, ``_kubelet``): torchrun in 2 pods, 4 ranks, each calling the function with its
values converted back to their types."""

from __future__ import annotations

import pytest
import subprocess
import sys
from pathlib import Path

import yaml

from ..targets._jobs import clean_env
from ..targets.kubeflow._kubelet import prepare, writable
from ..targets.kubeflow._operator import LOCALHOST, free_ports, pytorchjob_pods, rank_records, run_pods
from ..targets.kubeflow.test_manifests import validate
from .conftest import NASTY, WAIT, distcomp, explain

IMAGE = "registry.example/distcomp-torch:1"
VALUES = {"epochs": "2", "note": NASTY, "amp": "true"}


def _from_python(tmp_path: Path, project: Path) -> str:
    """``distcomp.compile(train, "kubeflow", ...)`` in a user's script (its own process: the
    project's ``train`` module is imported there, not into the tests')."""
    script = f"""
import sys
sys.path.insert(0, {str(project)!r})
import distcomp
from train import train

compiled = distcomp.compile(train, "kubeflow", nodes=2, image={IMAGE!r}, volumes={{"results": "/results"}},
                            inputs={VALUES!r})
sys.stdout.write(compiled.text)
"""
    proc = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True,
                          env=clean_env(), timeout=WAIT)
    assert proc.returncode == 0, explain(proc)
    return proc.stdout


@pytest.mark.slow
def test_compiles_crd_valid_with_its_code_and_every_pod_runs_the_function(project: Path, tmp_path: Path) -> None:
    flags = [w for name, value in VALUES.items() for w in ("-i", f"{name}={value}")]
    proc = distcomp(tmp_path, "compile", "proj/train.py:train", "--target", "kubeflow", "--nodes", "2",
                    "--image", IMAGE, "--volume", "results:/results", *flags)
    assert proc.returncode == 0, explain(proc)
    assert "in a ConfigMap mounted at /distcomp/code" in proc.stderr
    assert proc.stdout == _from_python(tmp_path, project)  # the CLI and the Python API: one manifest

    configmap, manifest = yaml.safe_load_all(proc.stdout)
    validate(manifest)  # the real CRD schema, and nothing the API server would prune
    assert manifest["kind"] == "PyTorchJob" and configmap["kind"] == "ConfigMap"
    (master,) = manifest["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"]
    assert master["image"] == IMAGE and master["command"][0] == "torchrun"
    shipped = {item["path"] for item in manifest["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]
               ["volumes"][-1]["configMap"]["items"]}
    # the function's module and the sibling it imports; the ignore files' own rules hold
    assert {"train.py", "helpers.py"} <= shipped
    assert not shipped & {"model.ckpt", "notes.txt", "scratch/tmp.py"}

    port = free_ports(1)[0]
    pods = [p.with_env(MASTER_ADDR=LOCALHOST, MASTER_PORT=str(port)) for p in pytorchjob_pods(manifest)]
    _, mains = prepare(manifest, pods, tmp_path / "cluster", {configmap["metadata"]["name"]: configmap}, {})
    try:
        done = run_pods(mains, tmp_path, tmp_path / "logs", timeout=WAIT)
        assert set(done.codes.values()) == {0}, done.explain()
    finally:
        writable(tmp_path / "cluster")
    out = tmp_path / "cluster" / "pvc" / "results" / "distcomp" / "fn-probe" / "outputs" / "out"
    got = rank_records(out)
    assert sorted(got) == [0, 1, 2, 3], done.explain()
    for rank, record in got.items():
        assert record["epochs"] == [2, "int"] and record["amp"] == [True, "bool"] and record["lr"] == [0.5, "float"]
        assert record["note"] == [NASTY, "str"]  # exactly as given: quotes, spaces, $(...), backticks
        assert record["mode"] == ["ok", "str"] and record["data"] == [None, "NoneType"]
        assert record["world"] == 4 and record["env"] == "yes" and record["out_type"] == "Output"
        pod = mains[rank // 2]  # 2 ranks in each pod, in the pod's code folder (its ConfigMap)
        assert pod.workdir and record["cwd"] == pod.workdir and Path(pod.workdir, "helpers.py").is_file()
    assert not list(tmp_path.rglob("pwned"))
