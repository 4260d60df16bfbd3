"""`distcomp compile --target kfp`: the component file a pipeline author loads."""

from __future__ import annotations

import pytest
import subprocess
import sys
from pathlib import Path

import yaml
from kfp import components

from ...conftest import REPO

SPEC = REPO / "examples" / "pytorch-ddp" / "component.yaml"


def compile_kfp(*flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "distcomp", "compile", "--target", "kfp", str(SPEC), *flags],
                          capture_output=True, text=True, timeout=120)


def test_component_file_loads_with_the_specs_interface(tmp_path: Path) -> None:
    out = tmp_path / "sub" / "component.yaml"
    proc = compile_kfp("--out", str(out), "--nproc-per-node", "3", "--image", "registry.example/ddp:1")
    assert proc.returncode == 0, proc.stderr
    component = components.load_component_from_file(str(out))
    spec = component.component_spec
    assert set(spec.inputs) == {"epochs", "lr", "batch_size", "samples", "seed", "data", "init_from"}
    assert set(spec.outputs) == {"model"} and spec.inputs["data"].optional
    container = spec.implementation.container
    assert container.image == "registry.example/ddp:1"
    assert "'nproc_per_node': 3" in out.read_text()  # the step's job record starts 3 ranks


def test_several_nodes_or_kubeflow_flags_are_refused_cleanly(tmp_path: Path) -> None:
    for flags, words in ((("--nodes", "2"), "--target kubeflow"), (("--input", "epochs=2"), "--target kubeflow"),
                         ((), "--out FILE")):
        out = tmp_path / "x.yaml"
        proc = compile_kfp(*flags, *(("--out", str(out)) if flags else ()))
        assert proc.returncode == 2 and words in proc.stderr and "Traceback" not in proc.stderr
        assert not out.exists()
    proc = compile_kfp("--out", str(tmp_path / "component.txt"))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "KFP component is written to a file ending in .yaml or .yml (got " in proc.stderr and not (tmp_path / "component.txt").exists()


def test_several_nodes_with_a_volume_submit_a_kubeflow_job(tmp_path: Path) -> None:
    out = tmp_path / "multi.yaml"
    proc = compile_kfp("--out", str(out), "--nodes", "2", "--image", "registry.example/ddp:1",
                       "--volume", "shared-data:/mnt/shared")
    assert proc.returncode == 0, proc.stderr
    text = out.read_text()
    assert "run_distcomp_submit(" in text and "'shared-data', '/mnt/shared'" in text


@pytest.mark.slow
def test_job_options_are_kubeflow_option_names_and_flags_are_refused(tmp_path: Path) -> None:
    base = ("--nodes", "2", "--image", "registry.example/ddp:1", "--volume", "shared-data:/mnt/shared")
    new = compile_kfp("--out", str(tmp_path / "new.yaml"), *base, "--job-option", "gpus_per_node=1",
                      "--job-option", "env=A=1", "--job-option", "env=B=2", "--job-option", "gang=true")
    assert new.returncode == 0, new.stderr
    (executor,) = yaml.safe_load((tmp_path / "new.yaml").read_text())["deploymentSpec"]["executors"].values()
    # the job's own restarts are the step's retry's (max_restarts 0), then the job options, by name
    assert "'max_restarts': 0, 'env': {'A': '1', 'B': '2'}, 'gang': True, 'gpus_per_node': 1" in max(
        executor["container"]["command"], key=len)
    # `distcomp submit` flags, the older form, are no longer read (issue 35)
    old = compile_kfp("--out", str(tmp_path / "old.yaml"), *base, "--job-option=--gpus-per-node=1",
                      "--job-option=--gang")
    assert (old.returncode, old.stdout) == (2, ""), old.stderr
    assert old.stderr == ("distcomp compile: --job-option '--gpus-per-node=1': give the kubeflow target's options "
                          "by name, not as flags: --job-option NAME=VALUE (e.g. gpus_per_node=1)\n")
    assert not (tmp_path / "old.yaml").exists()
    for option, message in (("gpus=1", "'gpus' is not an option of the kubeflow target"),
                            ("gpus_per_node=one", "gpus_per_node takes a whole number"),
                            ("name=x", "the step sets name itself")):
        bad = compile_kfp("--out", str(tmp_path / "bad.yaml"), *base, "--job-option", option)
        assert bad.returncode == 2 and message in bad.stderr and "Traceback" not in bad.stderr, bad.stderr
        assert not (tmp_path / "bad.yaml").exists()
