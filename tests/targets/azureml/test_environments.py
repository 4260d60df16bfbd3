"""Environments the Azure ML target keeps as Azure ML has them: an environment file
(``environment: file:env.yml``) and a Docker build context (``build:``, or the Component SDK's
``docker: {build: {dockerfile: ...}}``), their paths rebased to the folder the component is
written to. Each written file is loaded back by azure-ai-ml, which resolves the paths."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from distcomp import azureml
from distcomp.targets.azureml import compile_mapping
from distcomp.targets.azureml import AzureMLTargetError, to_yaml
from distcomp.core.plan import make_plan
from distcomp.spec import load

logging.getLogger("azure.ai.ml").setLevel(logging.ERROR)
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore:.*:UserWarning:marshmallow")

V2 = """$schema: https://azuremlschemas.azureedge.net/latest/commandJob.schema.json
command: python train.py
environment: {environment}
distribution:
  type: pytorch
  process_count_per_instance: 2
resources:
  instance_count: 2
"""


def azure_load(path: Path) -> Any:
    from azure.ai.ml import load_component

    component = load_component(source=str(path))
    result = component._validate()
    assert result.passed, result.error_messages
    return component


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A spec folder with an environment file and a Docker context, and an output folder beside it."""
    spec_dir = tmp_path / "project" / "jobs"
    (spec_dir / "environments" / "gpu").mkdir(parents=True)
    (spec_dir / "environments" / "gpu" / "Dockerfile").write_text("FROM python:3.11-slim\n")
    (spec_dir / "environments" / "env.yml").write_text("name: nccl_tests\nimage: example.org/nccl-tests:1\n")
    (tmp_path / "out" / "deep").mkdir(parents=True)
    return spec_dir


def test_an_environment_file_is_rebased(project: Path) -> None:
    spec = project / "job.yml"
    spec.write_text(V2.format(environment="file:./environments/env.yml"))
    out = project.parent.parent / "out" / "deep" / "component.yml"
    compiled = azureml.compile_component(spec, out)
    assert compiled.component["environment"] == "file:../../project/jobs/environments/env.yml"
    component = azure_load(out)
    # azure-ai-ml read the environment file through the rebased path
    assert component.environment.image == "example.org/nccl-tests:1"


@pytest.mark.parametrize("environment, dockerfile", [
    ("{build: {path: environments/gpu}}", None),
    ("{build: {path: ./environments/gpu, dockerfile_path: Dockerfile}}", "Dockerfile"),
])
def test_a_v2_build_context_is_kept_and_rebased(project: Path, environment: str, dockerfile: str | None) -> None:
    spec = project / "job.yml"
    spec.write_text(V2.format(environment=environment))
    out = project.parent.parent / "out" / "deep" / "component.yml"
    compiled = azureml.compile_component(spec, out)
    expected = {"path": "../../project/jobs/environments/gpu"}
    if dockerfile:
        expected["dockerfile_path"] = dockerfile
    assert compiled.component["environment"] == {"build": expected}
    assert not any("base image" in n for n in compiled.notes)  # no longer replaced by a base image
    build = azure_load(out).environment.build
    assert Path(out.parent, build.path).resolve() == (project / "environments" / "gpu").resolve()


def test_a_component_sdk_dockerfile_becomes_a_build_context(project: Path) -> None:
    spec = project / "component.yaml"
    spec.write_text("name: sdk_build\ntype: DistributedComponent\nenvironment:\n  docker:\n    build:\n"
                    "      dockerfile: file:environments/gpu/Dockerfile\n  os: Linux\n"
                    "launcher:\n  type: mpi\n  additional_arguments: python train.py\n")
    out = project.parent.parent / "out" / "component.yml"
    compiled = azureml.compile_component(spec, out)
    assert compiled.component["environment"] == {
        "build": {"path": "../project/jobs/environments/gpu", "dockerfile_path": "Dockerfile"}}
    assert azure_load(out).environment.build.dockerfile_path == "Dockerfile"


def test_a_build_context_drops_the_image_with_a_note(project: Path) -> None:
    spec = project / "job.yml"
    spec.write_text(V2.format(environment="{build: {path: environments/gpu}, image: python:3.11, "
                                          "conda_file: environments/env.yml}"))
    compiled = compile_mapping(make_plan(load(str(spec)), gpu=False), project)
    assert compiled.component["environment"] == {"build": {"path": "environments/gpu"}}
    assert any("image and conda_file were left out" in n for n in compiled.notes), compiled.notes


def test_a_missing_context_or_file_is_named(project: Path, tmp_path: Path) -> None:
    spec = project / "job.yml"
    spec.write_text(V2.format(environment="{build: {path: docker-context}}"))
    with pytest.raises(AzureMLTargetError, match="the environment build context 'docker-context' does not exist"):
        compile_mapping(make_plan(load(str(spec)), gpu=False), project)
    spec.write_text(V2.format(environment="file:missing.yml"))
    with pytest.raises(AzureMLTargetError, match="the environment file 'missing.yml' does not exist"):
        compile_mapping(make_plan(load(str(spec)), gpu=False), project)
    proc = subprocess.run([sys.executable, "-m", "distcomp", "compile", "--target", "azureml", str(spec),
                           "--out", str(tmp_path / "c.yml")], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "environment file 'missing.yml' does not exist" in proc.stderr and not (tmp_path / "c.yml").exists()


def test_a_url_build_context_is_kept_as_written(project: Path) -> None:
    spec = project / "job.yml"
    spec.write_text(V2.format(environment="{build: {path: 'https://github.com/org/repo.git#main:docker'}}"))
    compiled = compile_mapping(make_plan(load(str(spec)), gpu=False), project / "elsewhere")
    assert compiled.component["environment"] == {"build": {"path": "https://github.com/org/repo.git#main:docker"}}
    yaml.safe_load(to_yaml(compiled.component))
