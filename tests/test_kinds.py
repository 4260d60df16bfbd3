"""Native mappings as a third party declares them: the hookspec's ``mine`` launcher, installed
through its entry point, compiles to the native kind it maps (``distcomp_native_mappings``) on
Kubeflow and Azure ML, and to distcomp's node agent where it maps none. Each result is checked
by the real judge: the Kubeflow CRD schemas in tests/reference/crds, and azure-ai-ml's own loader
and validator."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from distcomp.core.hookspec import DistcompSpecs

from ._dists import install
from .targets.kubeflow.test_manifests import validate
from .test_plugins import example_code

logging.getLogger("azure.ai.ml").setLevel(logging.ERROR)
# azure-ai-ml (on marshmallow 3) warns about its own use of marshmallow APIs hundreds of times
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore:.*:UserWarning:marshmallow")

SPEC = ("name: mine-job\ntype: DistributedComponent\nenvironment: {image: 'python:3.11'}\n"
        "launcher:\n  type: mine\n  additional_arguments: python rank.py\n")


def _launcher() -> str:
    return example_code(DistcompSpecs.distcomp_launchers.__doc__ or "")


def _native() -> str:
    return example_code(DistcompSpecs.distcomp_native_mappings.__doc__ or "")


@pytest.fixture(params=["native", "agent"])
def plugin(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, dict[str, str], Path]:
    """The ``mine`` plugin installed by entry point, with its native mappings or without; the env
    that finds it and the spec that names it."""
    source = _launcher() + ("\n" + _native() if request.param == "native" else "")
    install(tmp_path / "site", "mypkg", "mypkg", source, "[distcomp]\nmine = mypkg\n")
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "site")}
    code = tmp_path / "code"
    code.mkdir()
    (code / "rank.py").write_text("import os\nprint(os.environ['MY_RANK'])\n")
    (code / "component.yaml").write_text(SPEC)
    return request.param, env, code / "component.yaml"


def distcomp(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "distcomp", *args], capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=120)


@pytest.mark.slow
def test_kubeflow_compiles_the_mapped_kind_else_the_agent_job(plugin: tuple[str, dict[str, str], Path],
                                                              tmp_path: Path) -> None:
    which, env, spec = plugin
    proc = distcomp("compile", "--target", "kubeflow", str(spec), "--nodes", "3", "--image", "python:3.11",
                    "--code", "image", env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    manifest = yaml.safe_load(proc.stdout)
    validate(manifest)  # the real CRD schema, and nothing the API server would prune
    assert (manifest["apiVersion"], manifest["kind"]) == ("kubeflow.org/v1", "PyTorchJob")
    replicas = manifest["spec"]["pytorchReplicaSpecs"]
    assert (replicas["Master"]["replicas"], replicas["Worker"]["replicas"]) == (1, 2)
    command = replicas["Master"]["template"]["spec"]["containers"][0]["command"]
    if which == "native":  # the mapped kind as distcomp builds it: torchrun in each pod
        assert command[0] == "torchrun" and command[-2:] == ["python", "rank.py"]
    else:  # no mapping: distcomp's node agent in each pod, carried in the pod's own command
        assert command[:2] == ["python3", "-c"] and "torchrun" not in command


@pytest.mark.slow
def test_azureml_compiles_the_mapped_distribution_else_the_agent(plugin: tuple[str, dict[str, str], Path],
                                                                 tmp_path: Path) -> None:
    from azure.ai.ml import load_component

    which, env, spec = plugin
    # two processes per node in the spec: the mapping's own process_count_per_instance goes over it
    proc = distcomp("compile", "--target", "azureml", str(spec), "--nodes", "2", "--nproc-per-node", "2",
                    "--out", "az/component.yml", env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    written = tmp_path / "az" / "component.yml"
    component: Any = load_component(source=str(written))  # azure-ai-ml's own loader ...
    result = component._validate()  # ... and validator, offline
    assert result.passed, result.error_messages
    assert type(component.distribution).__name__ == "PyTorchDistribution"
    assert (component.distribution.process_count_per_instance, component.resources.instance_count) == (1, 2)
    doc = yaml.safe_load(written.read_text())
    if which == "native":  # Azure's own distribution starts the command: no node agent
        assert doc["command"] == "python rank.py"
        assert "node agent" not in proc.stderr
    else:
        assert "distcomp.agent" in doc["command"] and "python rank.py" in doc["command"]
        assert "has no Azure ML distribution of its own" in proc.stderr
