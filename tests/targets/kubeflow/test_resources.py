"""Each replica asks for what the spec and the options say: GPUs, CPU, memory, /dev/shm; every
manifest still validates against the CRDs with nothing pruned."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import distcomp

from .test_manifests import JOBS, validate
from ._scratch import scratch
from ._scratch import job_doc

# seed 003, "MPI job - K8s": the draft dialect's per-role resources, as the seed writes them
SEED_003_K8S = """
environment:
  docker:
    image: docker.io/pytorch
code:
  path: ./src
command: >-
    mpirun -np 16 --allow-run-as-root -bind-to none -map-by slot
    -x LD_LIBRARY_PATH -x PATH -mca pml ob1 -mca btl ^openib
    python train.py
distributed:
  mpi:
    launcher:
      resources:
        limits:
          cpu: 1
          memory: 2Gi
    worker:
      count: 4
      resources:
        limits:
          gpu: 4
compute:
  infrastructure: k8s
  target: my-aks-cluster
"""

# seed 003's PyTorch job on Kubernetes: the framework's own resource_limits, for each worker
SEED_003_PYTORCH = """
command: python train.py
code:
  path: ./src
environment:
  docker:
    image: docker.io/pytorch
compute:
  type: k8s
  target: my-aks-cluster
environment_variables:
  LANGUAGE: en-us
distributed:
  pytorch:
    worker:
      count: 4
    resource_limits:
      gpu: 4
"""

V2_AZURE = """
$schema: https://azuremlschemas.azureedge.net/latest/commandComponent.schema.json
type: command
name: azure_sized
command: python train.py
environment:
  image: docker.io/pytorch
distribution:
  type: pytorch
  process_count_per_instance: 4
resources:
  instance_count: 2
  instance_type: Standard_NC24
  shm_size: 2g
"""


def pods(manifest: dict[str, Any]) -> dict[str, dict[str, Any]]:
    spec = manifest["spec"]
    key = next(k for k in spec if k.endswith("ReplicaSpecs"))
    return {t: r["template"]["spec"] for t, r in spec[key].items()}


def compiled(path: Path, **options: Any) -> dict[str, Any]:
    options.setdefault("code", "image")  # the pods' volumes here: resources' alone
    manifest: dict[str, Any] = distcomp.compile(str(path), "kubeflow", **scratch(path, options)).data
    validate(manifest)
    return manifest


@pytest.mark.slow
def test_seed_003_mpijob_carries_the_roles_resources_exactly(write_spec: Any) -> None:
    manifest = compiled(write_spec(SEED_003_K8S, "seed003.yaml"))
    assert manifest["kind"] == "MPIJob"
    launcher, worker = pods(manifest)["Launcher"], pods(manifest)["Worker"]
    assert launcher["containers"][0]["resources"] == {"limits": {"cpu": 1, "memory": "2Gi"}}
    assert worker["containers"][0]["resources"] == {"limits": {"nvidia.com/gpu": 4}}
    assert manifest["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"] == 4
    assert "volumes" not in worker and "volumes" not in launcher  # no /dev/shm unless asked, for MPI


@pytest.mark.slow
def test_options_override_per_node_and_spare_the_launcher(write_spec: Any) -> None:
    manifest = compiled(write_spec(SEED_003_K8S, "seed003.yaml"), gpus_per_node=8, cpu="16", memory="64Gi",
                        shm_size="8Gi")
    launcher, worker = pods(manifest)["Launcher"], pods(manifest)["Worker"]
    assert launcher["containers"][0]["resources"] == {"limits": {"cpu": 1, "memory": "2Gi"}}
    assert "volumes" not in launcher
    assert worker["containers"][0]["resources"] == {"limits": {"nvidia.com/gpu": 8, "cpu": "16", "memory": "64Gi"},
                                                    "requests": {"cpu": "16", "memory": "64Gi"}}
    assert worker["volumes"] == [{"name": "distcomp-shm", "emptyDir": {"medium": "Memory", "sizeLimit": "8Gi"}}]
    assert worker["containers"][0]["volumeMounts"] == [{"name": "distcomp-shm", "mountPath": "/dev/shm"}]


@pytest.mark.slow
def test_torch_gets_shared_memory_by_default_and_azure_sizes_map(write_spec: Any) -> None:
    plain = compiled(JOBS / "torch" / "component.yaml", image="i:1", nodes=2)
    for pod in pods(plain).values():
        assert pod["volumes"] == [{"name": "distcomp-shm", "emptyDir": {"medium": "Memory"}}]
        assert {"name": "distcomp-shm", "mountPath": "/dev/shm"} in pod["containers"][0]["volumeMounts"]
        assert "resources" not in pod["containers"][0]
    off = compiled(JOBS / "torch" / "component.yaml", image="i:1", shm_size="0")
    assert all("volumes" not in pod for pod in pods(off).values())
    azure = compiled(write_spec(V2_AZURE))  # Standard_NC24 has 4 GPUs; shm_size 2g is docker's 2 GiB
    for pod in pods(azure).values():
        assert pod["containers"][0]["resources"] == {"limits": {"nvidia.com/gpu": 4}}
        assert pod["volumes"][0]["emptyDir"] == {"medium": "Memory", "sizeLimit": "2Gi"}
    assert set(pods(azure)) == {"Master", "Worker"}


def test_trainjob_resources_per_node_and_shm_patch() -> None:
    manifest = compiled(JOBS / "torch" / "component.yaml", image="i:1", nodes=2, trainer_v2=True, gpus_per_node=2,
                        memory="8Gi", volumes={"data": "/data"})
    assert manifest["spec"]["trainer"]["resourcesPerNode"] == {"limits": {"nvidia.com/gpu": 2, "memory": "8Gi"},
                                                               "requests": {"memory": "8Gi"}}
    (patch,) = manifest["spec"]["runtimePatches"]
    (node,) = patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    pod = node["template"]["spec"]["template"]["spec"]
    assert [v["name"] for v in pod["volumes"]] == ["distcomp-pvc-0", "distcomp-shm"]
    assert [m["mountPath"] for m in pod["containers"][0]["volumeMounts"]] == ["/data", "/dev/shm"]


@pytest.mark.slow
def test_seed_003_pytorch_framework_limits_reach_every_node(write_spec: Any) -> None:
    path = write_spec(SEED_003_PYTORCH, "seed003-pytorch.yaml")
    (path.parent / "src").mkdir(exist_ok=True)
    manifest = compiled(path)
    specs = pods(manifest)
    assert sorted(specs) == ["Master", "Worker"] and manifest["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == 3
    for pod in specs.values():
        assert pod["containers"][0]["resources"] == {"limits": {"nvidia.com/gpu": 4}}
    own = write_spec(SEED_003_PYTORCH.replace("      count: 4\n", "      count: 4\n      resource_limits: {gpu: 2}\n"),
                     "seed003-own.yaml")
    assert all(p["containers"][0]["resources"] == {"limits": {"nvidia.com/gpu": 2}}
               for p in pods(compiled(own)).values())


@pytest.mark.parametrize("options, message", [
    ({"memory": "2GB"}, r"--memory: '2GB' is not a Kubernetes quantity .*2Gi"),
    ({"cpu": "two"}, r"--cpu: 'two' is not a Kubernetes quantity"),
    ({"shm_size": "lots"}, r"--shm-size: 'lots'"),
])
def test_a_bad_size_is_a_clear_error(options: dict[str, str], message: str) -> None:
    with pytest.raises(distcomp.errors.UsageError, match=message):
        distcomp.compile(str(JOBS / "torch" / "component.yaml"), "kubeflow", image="i:1", scratch=["result"], **options)


def test_a_bad_role_resource_names_where_it_is(write_spec: Any) -> None:
    path = write_spec(SEED_003_K8S.replace("memory: 2Gi", "memory: 2 gigs"), "seed003.yaml")
    with pytest.raises(distcomp.errors.UsageError, match=r"distributed\.launcher\.resources\.limits\.memory"):
        distcomp.compile(str(path), "kubeflow")


def test_cli_takes_the_resource_flags(tmp_path: Path) -> None:
    argv = [sys.executable, "-m", "distcomp", "compile", "--target", "kubeflow", str(JOBS / "torch" / "component.yaml"),
            "--scratch", "result",
            "--image", "i:1", "--gpus-per-node", "1", "--cpu", "500m", "--memory", "1Gi", "--shm-size", "256Mi"]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr

    (pod,) = pods(job_doc(proc.stdout)).values()
    assert pod["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": 1, "cpu": "500m", "memory": "1Gi"}
    assert pod["volumes"][0]["emptyDir"]["sizeLimit"] == "256Mi"
    bad = subprocess.run(argv[:-2] + ["--memory", "1 GB"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "--memory" in bad.stderr and "Traceback" not in bad.stderr
