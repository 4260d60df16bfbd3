"""A partial pod template reaches every replica of every kind, validated against the CRDs with
nothing pruned; a key Kubernetes does not know is a clear error naming it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

import distcomp
from distcomp.targets.kubeflow._podtemplate import CONTAINER_FIELDS, POD_FIELDS

from .test_manifests import JOBS, schema, validate
from ._scratch import job_doc

TEMPLATE: dict[str, Any] = {
    "metadata": {"labels": {"team": "vision"}, "annotations": {"sidecar.istio.io/inject": "false"}},
    "spec": {
        "nodeSelector": {"accelerator": "a100"},
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["gpu"]}]}]}}},
        "imagePullSecrets": [{"name": "regcred"}],
        "serviceAccountName": "trainer",
        "volumes": [{"name": "cfg", "configMap": {"name": "train-config"}}],
        "containers": [{
            "env": [{"name": "DISTCOMP_TEST_MARK", "value": "from-template"},
                    {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "token"}}}],
            "envFrom": [{"configMapRef": {"name": "settings"}}, {"secretRef": {"name": "creds"}}],
            "volumeMounts": [{"name": "cfg", "mountPath": "/etc/train"}]}],
    },
}


def pods(manifest: dict[str, Any]) -> dict[str, dict[str, Any]]:
    spec = manifest["spec"]
    key = next(k for k in spec if k.endswith("ReplicaSpecs"))
    return {t: r["template"] for t, r in spec[key].items()}


@pytest.mark.slow
@pytest.mark.parametrize("job", ["torch", "mpi", "tensorflow", "deepspeed"])
def test_the_template_reaches_every_replica(job: str) -> None:
    compiled = distcomp.compile(str(JOBS / job / "component.yaml"), "kubeflow", image="i:1", scratch=["result"],
                                code="image", nodes=2, pod_template=TEMPLATE)
    manifest = compiled.data
    # an MPIJob's ranks start over ssh: envFrom reaches its pods, not them, and compile says so
    assert any("envFrom reaches the MPIJob's pods but not the ranks" in n for n in compiled.notes) == (job == "mpi")
    validate(manifest)
    for template in pods(manifest).values():
        pod, main = template["spec"], template["spec"]["containers"][0]
        assert template["metadata"] == TEMPLATE["metadata"]
        for key in ("nodeSelector", "tolerations", "affinity", "imagePullSecrets", "serviceAccountName"):
            assert pod[key] == TEMPLATE["spec"][key], key
        assert {"name": "cfg", "configMap": {"name": "train-config"}} in pod["volumes"]
        assert {"name": "cfg", "mountPath": "/etc/train"} in main["volumeMounts"]
        assert main["envFrom"] == TEMPLATE["spec"]["containers"][0]["envFrom"]
        env = {e["name"]: e for e in main["env"]}
        assert env["DISTCOMP_TEST_MARK"] == {"name": "DISTCOMP_TEST_MARK", "value": "from-template"}  # replaced
        assert [e["name"] for e in main["env"]].count("DISTCOMP_TEST_MARK") == 1
        assert env["TOKEN"]["valueFrom"]["secretKeyRef"] == {"name": "creds", "key": "token"}
        assert main["command"]  # the training command is still distcomp's
    if job == "mpi":  # ranks started over ssh see what mpirun forwards: the template's env too
        command = pods(manifest)["Launcher"]["spec"]["containers"][0]["command"]
        assert command[command.index("TOKEN") - 1] == "-x" and command.count("DISTCOMP_TEST_MARK") == 1
    # the caller's mapping is not changed by a compile
    assert TEMPLATE["spec"]["containers"][0]["env"][0]["value"] == "from-template"


@pytest.mark.slow
def test_a_trainjob_takes_what_runtime_patches_carry() -> None:
    template = {"nodeSelector": {"accelerator": "a100"}, "serviceAccountName": "trainer",
                "tolerations": [{"key": "gpu", "operator": "Exists"}],
                "containers": [{"env": [{"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "c", "key": "t"}}}],
                                "volumeMounts": [{"name": "cfg", "mountPath": "/etc/train"}]}],
                "volumes": [{"name": "cfg", "configMap": {"name": "train-config"}}]}
    manifest = distcomp.compile(str(JOBS / "torch" / "component.yaml"), "kubeflow", image="i:1", scratch=["result"], code="image", nodes=2,
                                trainer_v2=True, pod_template=template).data
    validate(manifest)
    assert {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "c", "key": "t"}}} in manifest["spec"]["trainer"][
        "env"]
    (patch,) = manifest["spec"]["runtimePatches"]
    (node,) = patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    pod = node["template"]["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"accelerator": "a100"} and pod["serviceAccountName"] == "trainer"
    assert [v["name"] for v in pod["volumes"]] == ["distcomp-shm", "cfg"]
    assert {"name": "cfg", "mountPath": "/etc/train"} in pod["containers"][0]["volumeMounts"]
    with pytest.raises(distcomp.errors.UsageError, match=r"runtimePatches cannot carry containers\[\]\.envFrom"):
        distcomp.compile(str(JOBS / "torch" / "component.yaml"), "kubeflow", image="i:1", scratch=["result"], code="image", trainer_v2=True,
                         pod_template={"containers": [{"envFrom": [{"secretRef": {"name": "c"}}]}]})
    with pytest.raises(distcomp.errors.UsageError, match="runtimePatches cannot carry hostNetwork"):
        distcomp.compile(str(JOBS / "torch" / "component.yaml"), "kubeflow", image="i:1", scratch=["result"], code="image", trainer_v2=True,
                         pod_template={"hostNetwork": True})


@pytest.mark.parametrize("template, message", [
    ({"nodeSelectr": {"a": "b"}}, r"nodeSelectr is not a pod spec field; did you mean 'nodeSelector'\?"),
    ({"containers": [{"envFromm": []}]}, r"containers\[0\]\.envFromm is not a container's field; did you mean "
                                         r"'envFrom'"),
    ({"restartPolicy": "Always"}, "restartPolicy is distcomp's to set"),
    ({"containers": [{"command": ["sh"]}]}, "command of the training container is distcomp's"),
    ({"metadata": {"name": "x"}, "spec": {}}, r"metadata\.name cannot be set per pod"),
    ("not a mapping", "No such file"),
])
def test_a_bad_template_is_a_clear_error(template: Any, message: str) -> None:
    with pytest.raises(distcomp.errors.UsageError, match=message):
        distcomp.compile(str(JOBS / "torch" / "component.yaml"), "kubeflow", image="i:1", scratch=["result"], code="image", pod_template=template)


@pytest.mark.slow
@pytest.mark.parametrize("crd_kind, key", [(("kubeflow.org/v1", "PyTorchJob"), "pytorchReplicaSpecs"),
                                           (("kubeflow.org/v1", "TFJob"), "tfReplicaSpecs"),
                                           (("kubeflow.org/v2beta1", "MPIJob"), "mpiReplicaSpecs")])
def test_every_field_accepted_is_one_the_crds_keep(crd_kind: tuple[str, str], key: str) -> None:
    """The field lists are Kubernetes' own (the client's models), and none is pruned by a CRD."""
    from kubernetes.client import V1Container, V1PodSpec

    assert set(POD_FIELDS) == set(V1PodSpec.attribute_map.values())
    assert set(CONTAINER_FIELDS) == set(V1Container.attribute_map.values())
    template = schema(*crd_kind)["properties"]["spec"]["properties"][key]["additionalProperties"]["properties"][
        "template"]
    pod = template["properties"]["spec"]["properties"]
    assert set(POD_FIELDS) <= set(pod)
    assert set(CONTAINER_FIELDS) <= set(pod["containers"]["items"]["properties"])


@pytest.mark.slow
def test_cli_reads_a_template_file(tmp_path: Path) -> None:
    path = tmp_path / "pod.yaml"
    path.write_text(yaml.safe_dump(TEMPLATE), encoding="utf-8")
    argv = [sys.executable, "-m", "distcomp", "compile", "--target", "kubeflow", str(JOBS / "mpi" / "component.yaml"),
            "--image", "i:1", "--pod-template", str(path), "--scratch", "result"]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    manifest = job_doc(proc.stdout)
    validate(manifest)
    assert all(t["spec"]["nodeSelector"] == {"accelerator": "a100"} for t in pods(manifest).values())
    path.write_text("tolerations: []\nhostNetwrk: true\n", encoding="utf-8")
    bad = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "hostNetwrk is not a pod spec field" in bad.stderr and "Traceback" not in bad.stderr
