"""Every manifest `distcomp compile --target kubeflow` writes is one the cluster would accept:
valid against the operators' real CRD schemas (tests/reference/crds), nothing in it that their
structural schemas would prune, and, where the kubeflow-training SDK has a typed model of the
kind, one it loads without losing a field."""

from __future__ import annotations

import copy
import functools
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from distcomp.core.plugins import get_plugin_manager
from distcomp.spec import bind_inputs, load
from distcomp.targets.kubeflow import CompileError, compile_job
from distcomp.core.plan import make_plan

from ...conftest import REFERENCE
from ._structural import pruned
from ._scratch import job_doc

JOBS = Path(__file__).resolve().parents[2] / "launchers" / "jobs"
CRDS = {
    ("kubeflow.org/v1", "PyTorchJob"): "kubeflow.org_pytorchjobs.v1.yaml",
    ("kubeflow.org/v1", "TFJob"): "kubeflow.org_tfjobs.v1.yaml",
    ("kubeflow.org/v2beta1", "MPIJob"): "kubeflow.org_mpijobs.v2beta1.yaml",
    ("trainer.kubeflow.org/v1alpha1", "TrainJob"): "trainer.kubeflow.org_trainjobs.yaml",
}
KINDS = {"torch": "PyTorchJob", "deepspeed": "PyTorchJob", "mpi": "MPIJob", "tensorflow": "TFJob"}
MODELS = {"PyTorchJob": "KubeflowOrgV1PyTorchJob", "TFJob": "KubeflowOrgV1TFJob"}  # the SDK has no v2beta1 MPIJob


@functools.cache
def schema(api_version: str, kind: str) -> dict[str, Any]:
    """The kind's openAPIV3Schema, read once per process (each CRD is ~0.5 MB of YAML: ~1 s to
    parse in pure Python, 0.1 s with libyaml). Shared: callers only read it."""
    text = (REFERENCE / "crds" / CRDS[(api_version, kind)]).read_text()
    crd = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    version = api_version.split("/")[1]
    (found,) = [v for v in crd["spec"]["versions"] if v["name"] == version]
    return found["schema"]["openAPIV3Schema"]


@functools.cache
def validator(api_version: str, kind: str) -> jsonschema.Draft7Validator:
    """A validator of the kind's schema, the schema itself checked once (``jsonschema.validate``
    would check the whole schema again at every call)."""
    crd = schema(api_version, kind)
    jsonschema.Draft7Validator.check_schema(crd)
    return jsonschema.Draft7Validator(crd)


class Pruned(AssertionError):
    """The cluster would silently drop these keys (unknown to the CRD's structural schema)."""


def validate(manifest: dict[str, Any]) -> None:
    """Valid against the CRD, and nothing in it that the API server would prune."""
    crd = schema(manifest["apiVersion"], manifest["kind"])
    error = jsonschema.exceptions.best_match(validator(manifest["apiVersion"], manifest["kind"]).iter_errors(manifest))
    if error is not None:  # what jsonschema.validate raises
        raise error
    dropped = pruned(manifest, crd)
    if dropped:
        raise Pruned(f"{manifest['kind']}: the API server would prune {', '.join(dropped)}")


def compile_for(job: str, nodes: int, per_node: int, trainer_v2: bool = False, **kw: Any) -> dict[str, Any]:
    spec = load(str(JOBS / job / "component.yaml")).with_overrides(nodes=nodes, processes_per_node=per_node)
    values = bind_inputs(spec, {}, Path("/"))
    outputs = {n: f"/outputs/{n}" for n in spec.outputs}
    return compile_job(make_plan(spec, gpu=False, pm=get_plugin_manager()), values, outputs, pm=get_plugin_manager(), image="registry.example/distcomp-test:1",
                       trainer_v2=trainer_v2, env={"MLFLOW_TRACKING_URI": "http://mlflow.kubeflow:5000"}, **kw)


def replicas(manifest: dict[str, Any]) -> dict[str, int]:
    spec = manifest["spec"]
    key = next(k for k in spec if k.endswith("ReplicaSpecs"))
    return {role: r["replicas"] for role, r in spec[key].items()}


CASES = [(job, nodes, per_node) for job in KINDS for nodes in (1, 2, 3) for per_node in (1, 2)]


@pytest.mark.slow
@pytest.mark.parametrize("job, nodes, per_node", CASES)
def test_every_manifest_validates_against_its_crd(job: str, nodes: int, per_node: int) -> None:
    manifest = compile_for(job, nodes, per_node)
    assert manifest["kind"] == KINDS[job]
    validate(manifest)
    counts = replicas(manifest)
    if manifest["kind"] == "PyTorchJob":
        assert counts == ({"Master": 1, "Worker": nodes - 1} if nodes > 1 else {"Master": 1})
        assert manifest["spec"]["nprocPerNode"] == str(per_node)
    elif manifest["kind"] == "MPIJob":
        assert counts == {"Launcher": 1, "Worker": nodes} and manifest["spec"]["slotsPerWorker"] == per_node
        command = manifest["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]["command"]
        assert command[command.index("--np") + 1] == str(nodes * per_node)  # the MPI launcher's own mpirun
        assert "MLFLOW_TRACKING_URI" in command  # forwarded to every rank with -x
    else:  # one pod per TensorFlow task
        assert counts == {"Worker": nodes * per_node}


@pytest.mark.parametrize("job", ["torch", "deepspeed"])
@pytest.mark.parametrize("nodes", [1, 3])
def test_trainer_v2_trainjobs_validate(job: str, nodes: int) -> None:
    manifest = compile_for(job, nodes, 2, trainer_v2=True)
    assert manifest["kind"] == "TrainJob"
    validate(manifest)
    trainer = manifest["spec"]["trainer"]
    assert trainer["numNodes"] == nodes and trainer["numProcPerNode"] == 2
    runtime = {"torch": "torch-distributed", "deepspeed": "deepspeed-distributed"}[job]
    # with its kind: Trainer's own runtimes are ClusterTrainingRuntimes (its examples write them so)
    assert manifest["spec"]["runtimeRef"] == {"apiGroup": "trainer.kubeflow.org", "kind": "ClusterTrainingRuntime",
                                              "name": runtime}


@pytest.mark.parametrize("job, nodes, per_node", [c for c in CASES if KINDS[c[0]] in MODELS])
def test_typed_models_load_every_field(job: str, nodes: int, per_node: int) -> None:
    from kubeflow.training import ApiClient

    manifest = compile_for(job, nodes, per_node)
    client = ApiClient()

    class Response:
        data = json.dumps(manifest)

    model = client.deserialize(Response(), MODELS[manifest["kind"]])
    assert type(model).__name__ == MODELS[manifest["kind"]]
    # serialized back, nothing we wrote was unknown to the model (deserialize drops unknown keys)
    assert client.sanitize_for_serialization(model) == manifest


@pytest.mark.slow
@pytest.mark.parametrize("mutate, path", [
    (lambda m: m["spec"]["pytorchReplicaSpecs"]["Master"].update(replicas="one"), "replicas"),
    (lambda m: m["spec"].update(nprocPerNode=2), "string"),
    (lambda m: m["spec"].pop("pytorchReplicaSpecs"), "pytorchReplicaSpecs"),
    (lambda m: m["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0].pop("name"), "name"),
])
def test_the_schemas_would_catch_a_broken_manifest(mutate: Any, path: str) -> None:
    """The validation above is not vacuous: what the CRD forbids fails it."""
    broken = copy.deepcopy(compile_for("torch", 2, 2))
    mutate(broken)
    with pytest.raises(jsonschema.ValidationError, match=path):
        validate(broken)


@pytest.mark.slow
def test_the_strict_check_refuses_what_the_api_server_would_prune() -> None:
    """Trainer v2.0's podSpecOverrides passes jsonschema (unknown keys are allowed there) but an
    API server prunes it, and the PVC mount with it: the strict check refuses it, at any depth."""
    manifest = compile_for("torch", 2, 1, trainer_v2=True)
    old = copy.deepcopy(manifest)
    old["spec"]["podSpecOverrides"] = [{"targetJobs": [{"name": "node"}], "volumes": []}]
    validator(old["apiVersion"], old["kind"]).validate(old)
    with pytest.raises(Pruned, match=r"spec\.podSpecOverrides"):
        validate(old)
    deep = copy.deepcopy(compile_for("torch", 2, 1))
    deep["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["volumeMount"] = []
    with pytest.raises(Pruned, match=r"Master\.template\.spec\.containers\[0\]\.volumeMount\b"):
        validate(deep)


def test_the_strict_check_keeps_what_the_schema_keeps() -> None:
    """Maps (additionalProperties), preserved subtrees and the root's metadata are not pruned."""
    crd = {"type": "object", "properties": {
        "spec": {"type": "object", "properties": {
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            "items": {"type": "array", "items": {"type": "object", "properties": {"a": {"type": "string"}}}}}},
        "metadata": {"type": "object"}}}
    doc = {"apiVersion": "v1", "kind": "K", "metadata": {"name": "n", "labels": {"x": "y"}},
           "spec": {"labels": {"any": "thing"}, "free": {"what": {"ever": 1}}, "items": [{"a": "1"}, {"b": "2"}]}}
    assert pruned(doc, crd) == ["spec.items[1].b"]


def test_user_dollar_parens_survive_kubernetes_expansion(write_spec: Any) -> None:
    spec_path = write_spec("""
name: dollars
type: DistributedComponent
inputs:
  pattern: {type: String, default: "$(HOME)"}
launcher:
  type: torch.distributed
  process_count_per_node: 1
  additional_arguments: python x.py --p {inputs.pattern}
""")
    spec = load(str(spec_path))
    manifest = compile_job(make_plan(spec, gpu=False, pm=get_plugin_manager()), bind_inputs(spec, {}, Path("/")), {}, pm=get_plugin_manager(), image="i:1")
    command = manifest["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["command"]
    assert command[-1] == "$$(HOME)" and "$(MASTER_ADDR)" in command


def test_compile_refuses_what_a_pod_cannot_do_and_keeps_shell_lines(write_spec: Any) -> None:
    spec = load(str(JOBS / "torch" / "component.yaml"))
    pm = get_plugin_manager()
    with pytest.raises(CompileError, match="--image"):
        compile_job(make_plan(spec, gpu=False, pm=pm), bind_inputs(spec, {}, Path("/")), {"result": "/o"}, pm=pm)
    with pytest.raises(CompileError, match="job name"):
        compile_job(make_plan(spec, gpu=False, pm=pm), bind_inputs(spec, {}, Path("/")), {"result": "/o"}, pm=pm, image="i:1", name="Bad_Name")
    env_spec = load(str(write_spec("""
name: envref
type: DistributedComponent
launcher:
  type: mpi
  process_count_per_node: 1
  additional_arguments: python x.py --rank $OMPI_COMM_WORLD_RANK
""", "env.yaml")))
    # a rank's variable is its shell's to fill in the pod (test_pod_conformance runs it); Kubernetes
    # must not expand it first, so its $ is doubled
    manifest = compile_job(make_plan(env_spec, gpu=False, pm=pm), {}, {}, pm=pm, image="i:1")
    (launcher,) = manifest["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"]
    assert launcher["command"][-3:] == ["/bin/sh", "-c", "python x.py --rank $$OMPI_COMM_WORLD_RANK"]


def test_the_tfjob_builder_takes_the_topology_it_is_given() -> None:
    """The TFJob's replicas are the Topology's roles (the target passes the launcher's own),
    not a second reading of the spec: the builder asks no launcher module."""
    import dataclasses

    from distcomp.records import JobOptions, Replica, Topology
    from distcomp.targets.kubeflow.jobs import tfjob

    spec = load(str(JOBS / "tensorflow" / "component.yaml"))
    tasks = [("chief", 0), ("worker", 0), ("worker", 1), ("worker", 2), ("ps", 0)]
    topology = Topology(launcher="mine", nodes=1, processes_per_node=1, world_size=4, replicas=tuple(
        Replica(role=role, index=i, node=0, service=role == "ps") for role, i in tasks))
    options = JobOptions(name="tf", image="i:1", command=("python", "x.py"), topology=topology)
    manifest = tfjob(spec, options)
    validate(manifest)
    assert replicas(manifest) == {"Chief": 1, "Worker": 3, "PS": 1}
    with pytest.raises(CompileError, match="no replica type for role"):
        tfjob(spec, dataclasses.replace(options, topology=dataclasses.replace(topology, replicas=(
            Replica(role="worker", index=0, node=0), Replica(role="driver", index=0, node=0)))))


def test_tensorflow_has_no_trainjob() -> None:
    from distcomp.targets.kubeflow import CompileError

    with pytest.raises(CompileError, match="no Kubeflow Trainer v2 TrainJob"):
        compile_for("tensorflow", 2, 1, trainer_v2=True)


@pytest.mark.slow
def test_cli_writes_the_manifest_whole(tmp_path: Path) -> None:
    out = tmp_path / "job.yaml"
    argv = [sys.executable, "-m", "distcomp", "compile", "--target", "kubeflow", str(JOBS / "mpi" / "component.yaml"),
            "--scratch", "result", "--nodes", "2", "--nproc-per-node", "2", "--image", "img:1", "--name", "mpi-test", "--namespace", "ml",
            "--out", str(out)]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    manifest = job_doc(out.read_text())
    validate(manifest)
    assert manifest["metadata"] == {"name": "mpi-test", "namespace": "ml",
                                    "labels": {"app.kubernetes.io/managed-by": "distcomp",
                                               "distcomp.dev/component": "launcher-test-mpi"},
                                    # where each output lasts, for `distcomp status` of the job from anywhere
                                    "annotations": {"distcomp.io/outputs": '{"result": "scratch (lost with the pod)"}'}}
    assert "&id" not in out.read_text()  # no YAML anchors: each replica spelled out
    bad = subprocess.run(argv[:-2] + ["--image", "", "--out", str(tmp_path / "none.yaml")], capture_output=True,
                         text=True, timeout=60)
    assert bad.returncode == 2 and "--image" in bad.stderr and "Traceback" not in bad.stderr
    assert not (tmp_path / "none.yaml").exists() and not list(tmp_path.glob(".*.tmp"))


@pytest.mark.slow
@pytest.mark.parametrize("job, trainer_v2", [("torch", False), ("mpi", False), ("tensorflow", False),
                                             ("torch", True)])
def test_volumes_mount_a_claim_in_every_pod(job: str, trainer_v2: bool) -> None:
    manifest = compile_for(job, 2, 1, trainer_v2=trainer_v2, volumes={"shared.data": "/mnt/shared"})
    validate(manifest)
    volume = {"name": "distcomp-pvc-0", "persistentVolumeClaim": {"claimName": "shared.data"}}
    mount = {"name": "distcomp-pvc-0", "mountPath": "/mnt/shared"}
    if trainer_v2:  # through runtimePatches (Trainer >= v2.2), onto the runtime's "node" job and container
        (patch,) = manifest["spec"]["runtimePatches"]
        (node,) = patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
        assert node["name"] == "node" and patch["manager"]
        pod = node["template"]["spec"]["template"]["spec"]
        # the PVC first; then torch's memory-backed /dev/shm (test_resources)
        assert pod["volumes"][0] == volume and pod["containers"][0]["name"] == "node"
        assert pod["containers"][0]["volumeMounts"][0] == mount
        return
    spec = manifest["spec"]
    key = next(k for k in spec if k.endswith("ReplicaSpecs"))
    for role in spec[key].values():
        pod = role["template"]["spec"]
        assert pod["volumes"][0] == volume and pod["containers"][0]["volumeMounts"][0] == mount


def test_a_bad_volume_is_refused() -> None:
    with pytest.raises(CompileError, match="CLAIM:/PATH"):
        compile_for("torch", 2, 1, volumes={"Bad_Claim": "/mnt"})
    with pytest.raises(CompileError, match="CLAIM:/PATH"):
        compile_for("torch", 2, 1, volumes={"claim": "relative"})


def test_cli_takes_volumes(tmp_path: Path) -> None:
    argv = [sys.executable, "-m", "distcomp", "compile", "--target", "kubeflow", str(JOBS / "torch" / "component.yaml"),
            "--nodes", "2", "--image", "img:1", "--volume", "data:/mnt/data", "--volume", "ckpt:/ckpt"]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    pod = job_doc(proc.stdout)["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]
    claims = [v["persistentVolumeClaim"]["claimName"] for v in pod["volumes"] if "persistentVolumeClaim" in v]
    assert claims == ["data", "ckpt"]
    # the outputs default onto the first volume; the code comes in a ConfigMap
    assert [m["mountPath"] for m in pod["containers"][0]["volumeMounts"]] == ["/mnt/data", "/ckpt", "/dev/shm",
                                                                              "/distcomp/code"]
    bad = subprocess.run(argv[:-2] + ["--volume", "nopath"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "CLAIM:PATH" in bad.stderr and "Traceback" not in bad.stderr
