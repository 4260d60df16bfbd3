"""A port value a Kubeflow pod cannot open (an Azure ML data URI, a storage or web URL) is
refused by name, with what to give instead; Azure ML would mount or download it, a pod would
get the URI's text as a path."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import distcomp
from distcomp.spec import InputError

from ...conftest import REFERENCE
from ._scratch import scratch

CIFAR = REFERENCE / "peer-specs" / "azureml-v2-job-pytorch-cifar.yml"  # cifar: {path: azureml:cifar-10-example:1}
SPEC = """$schema: https://azuremlschemas.azureedge.net/latest/commandJob.schema.json
command: python train.py --data ${{inputs.data}} --url ${{inputs.url}} --out ${{outputs.model}}
inputs:
  data: {type: uri_folder}
  url: {type: string, default: "https://example.org/page"}
outputs:
  model: {type: uri_folder}
environment: {image: "python:3.11-slim"}
distribution: {type: pytorch, process_count_per_instance: 1}
resources: {instance_count: 2}
"""


def compile_text(spec: Path, **options: object) -> str:
    return distcomp.compile(spec, "kubeflow", image="registry.example/train:1", **scratch(spec, options)).text


def test_an_azureml_default_is_named_with_what_to_give() -> None:
    with pytest.raises(InputError) as info:
        compile_text(CIFAR)
    assert str(info.value) == (
        "input 'cifar' is 'azureml:cifar-10-example:1' (its default in the spec), an Azure ML data asset or datastore "
        "URI that a Kubeflow pod cannot read as a path: give a path the pods see, e.g. --input cifar=/data/cifar on a "
        "--volume CLAIM:/data holding it (download it there first)")
    # the remedy it names works
    manifest = yaml.safe_load(compile_text(CIFAR, inputs={"cifar": "/data/cifar"}, volumes={"datasets": "/data"}))
    assert "/data/cifar" in yaml.safe_dump(manifest["spec"])


@pytest.mark.parametrize("value, kind", [
    ("azureml://datastores/workspaceblobstore/paths/mnist/", "an Azure ML data asset or datastore URI"),
    ("wasbs://datasets@azuremlexamples.blob.core.windows.net/nyctaxi/", "an Azure Storage URI"),
    ("abfss://data@account.dfs.core.windows.net/x", "an Azure Storage URI"),
    ("https://azuremlexamples.blob.core.windows.net/datasets/iris.csv", "a web URL"),
])
def test_every_given_uri_is_refused_at_once(write_spec, value: str, kind: str) -> None:
    spec = write_spec(SPEC, "job.yml")
    with pytest.raises(InputError) as info:
        compile_text(spec, inputs={"data": value}, output_paths={"model": "azureml://datastores/out/paths/m"})
    lines = str(info.value).splitlines()
    assert lines[0].startswith(f"input 'data' is {value!r}, {kind} that a Kubeflow pod cannot read as a path")
    assert lines[1].startswith("output 'model' is 'azureml://datastores/out/paths/m', an Azure ML data asset or "
                               "datastore URI that a Kubeflow pod cannot write as a path: give a path the pods see, "
                               "e.g. --output-path model=/data/model")
    assert len(lines) == 2  # the https:// default of a string parameter is a value, not a path


def test_paths_in_the_pod_compile(write_spec) -> None:
    spec = write_spec(SPEC, "job.yml")
    text = compile_text(spec, inputs={"data": "/mnt/data"}, output_paths={"model": "/mnt/out/model"}, volumes={"out": "/mnt/out"})
    assert "/mnt/data" in text and "/mnt/out/model" in text and "https://example.org/page" in text


def test_the_cli_says_it_without_a_traceback(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "distcomp", "compile", "--target", "kubeflow", str(CIFAR),
                           "--image", "i:1", "--out", str(tmp_path / "job.yaml")], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "input 'cifar' is 'azureml:cifar-10-example:1'" in proc.stderr and not (tmp_path / "job.yaml").exists()
