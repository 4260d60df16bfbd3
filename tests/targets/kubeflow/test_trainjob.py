"""TrainJobs written against today's Trainer CRD (runtimeRef with its kind, resourcesPerNode,
runtimePatches), validated with nothing pruned."""

from __future__ import annotations

from typing import Any

import pytest

import distcomp

from .test_manifests import JOBS, validate
from ._scratch import scratch


def compiled(**options: Any) -> dict[str, Any]:
    path = JOBS / "torch" / "component.yaml"
    manifest: dict[str, Any] = distcomp.compile(str(path), "kubeflow", image="i:1", trainer_v2=True,
                                                **scratch(path, options)).data
    validate(manifest)
    return manifest


@pytest.mark.parametrize("runtime, ref", [
    ("my-torch", {"apiGroup": "trainer.kubeflow.org", "kind": "ClusterTrainingRuntime", "name": "my-torch"}),
    ("TrainingRuntime/team-torch", {"apiGroup": "trainer.kubeflow.org", "kind": "TrainingRuntime",
                                    "name": "team-torch"}),
])
def test_the_runtime_is_referenced_with_its_kind(runtime: str, ref: dict[str, str]) -> None:
    assert compiled(runtime=runtime)["spec"]["runtimeRef"] == ref


def test_a_whole_trainjob_uses_only_todays_fields() -> None:
    """Everything at once: resourcesPerNode, the deadline, a PVC, /dev/shm and a pod template
    through distcomp's one runtimePatches entry; no podSpecOverrides (Trainer v2.0's, pruned)."""
    manifest = compiled(nodes=2, gpus_per_node=1, cpu="4", active_deadline=600, volumes={"data": "/data"},
                        pod_template={"nodeSelector": {"pool": "gpu"}})
    spec = manifest["spec"]
    assert set(spec) == {"runtimeRef", "trainer", "runtimePatches", "activeDeadlineSeconds"}
    assert spec["trainer"]["resourcesPerNode"]["limits"] == {"nvidia.com/gpu": 1, "cpu": "4"}
    (patch,) = spec["runtimePatches"]
    assert patch["manager"] == "distcomp.dev/compile"


@pytest.mark.parametrize("options, message", [
    ({"runtime": "Job/x"}, "give NAME .* or KIND/NAME"),
    ({"runtime": "TrainingRuntime/"}, "give NAME"),
])
def test_a_bad_runtime_is_a_clear_error(options: dict[str, Any], message: str) -> None:
    with pytest.raises(distcomp.errors.UsageError, match=message):
        compiled(**options)


def test_a_runtime_without_trainer_v2_is_refused() -> None:
    with pytest.raises(distcomp.errors.UsageError, match="a PyTorchJob has no Trainer runtime"):
        distcomp.compile(str(JOBS / "torch" / "component.yaml"), "kubeflow", image="i:1", runtime="torch-distributed",
                         scratch=["result"])
