"""A KFP step's pod settings reach its training pods (``--inherit-pod``): the step's pod, built
from a real pipeline compiled by kfp with kfp-kubernetes settings as KFP's backend would build
it (``_kfp_pod``), gives a partial pod template holding what the user put on the step and
nothing of KFP's, Argo's or Kubernetes' own; merged into every replica of each compiled job it
validates against the CRDs with nothing pruned. The pod is read through the real kubernetes
client from a server on 127.0.0.1 answering as the Kubernetes API does, 403 and 404 included."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any, Iterator

import pytest
from kubernetes import client as k8s

import distcomp
from distcomp.core.plugins import get_plugin_manager
from distcomp.spec import bind_inputs, load
from distcomp.targets.kubeflow import compile_job
from distcomp.targets.kubeflow._inherit import (combine, fit_trainjob, inherit_options, inherited_template, own_pod,
                                                read_own_pod)
from distcomp.targets.kubeflow._podtemplate import load as load_template
from distcomp.targets.kubeflow._settings import JobSettings, replica_specs
from distcomp.core.plan import make_plan

from ._http import FakeKube, JsonHandler
from ._kfp_pod import step_pod
from .test_manifests import JOBS, validate

ALLREDUCE = Path(__file__).resolve().parents[1] / "kfp" / "jobs" / "allreduce" / "component.yaml"
CLAIM, MOUNT = "shared-data", "/mnt/shared"
NS, POD = "kubeflow-user", "p-8k2dq-system-container-impl-3791405512"
pytestmark = pytest.mark.filterwarnings("ignore:You may be attemping to run a task:RuntimeWarning")

# what the user put on the step (the pipeline below), as the training pods get it
EXPECTED: dict[str, Any] = {
    "metadata": {"labels": {"team": "vision"},
                 "annotations": {"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}},
    "spec": {
        "nodeSelector": {"accelerator": "nvidia-a100"},
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["gpu"]}]}]}}},
        "serviceAccountName": "pipeline-runner",
        "imagePullSecrets": [{"name": "regcred"}],
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "volumes": [{"name": "datasets", "persistentVolumeClaim": {"claimName": "datasets"}},
                    {"name": "gcp-key", "secret": {"secretName": "gcp-key", "optional": False}},
                    {"name": "train-config", "configMap": {"name": "train-config", "optional": False}}],
        "containers": [{
            "env": [{"name": "AWS_ACCESS_KEY_ID",
                     "valueFrom": {"secretKeyRef": {"key": "access", "name": "s3-creds", "optional": False}}},
                    {"name": "LR", "valueFrom": {"configMapKeyRef": {"key": "lr", "name": "train-settings",
                                                                     "optional": False}}},
                    {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName",
                                                                     "apiVersion": "v1"}}}],
            "volumeMounts": [{"name": "datasets", "mountPath": "/data"}, {"name": "gcp-key", "mountPath": "/etc/gcp"},
                             {"name": "train-config", "mountPath": "/etc/train"}]}],
    },
}


@pytest.fixture(scope="module")
def pod(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The pod of distcomp's multi-node KFP step, its task given kfp-kubernetes settings."""
    from kfp import compiler, dsl, kubernetes

    from distcomp.kfp import load_component

    train = load_component(ALLREDUCE, nodes=2, image="registry.example/ddp:1", shared_volume=(CLAIM, MOUNT))

    @dsl.pipeline(name="p")
    def pipeline():  # no "-> None": under future annotations kfp takes the string "None" for an output type
        data = dsl.importer(artifact_uri="gs://bucket/data.txt", artifact_class=dsl.Dataset)
        task = train(data=data.output)
        task.set_env_variable("MLFLOW_TRACKING_URI", "http://mlflow.kubeflow:5000")
        kubernetes.mount_pvc(task, pvc_name=CLAIM, mount_path=MOUNT)  # the shared volume distcomp mounts too
        kubernetes.mount_pvc(task, pvc_name="datasets", mount_path="/data")
        kubernetes.add_node_selector(task, "accelerator", "nvidia-a100")
        kubernetes.add_toleration(task, key="nvidia.com/gpu", operator="Exists", effect="NoSchedule")
        kubernetes.add_node_affinity(task, match_expressions=[{"key": "pool", "operator": "In", "values": ["gpu"]}])
        kubernetes.use_secret_as_env(task, secret_name="s3-creds", secret_key_to_env={"access": "AWS_ACCESS_KEY_ID"})
        kubernetes.use_config_map_as_env(task, config_map_name="train-settings", config_map_key_to_env={"lr": "LR"})
        kubernetes.use_secret_as_volume(task, secret_name="gcp-key", mount_path="/etc/gcp")
        kubernetes.use_config_map_as_volume(task, config_map_name="train-config", mount_path="/etc/train")
        kubernetes.use_field_path_as_env(task, env_name="NODE_NAME", field_path="spec.nodeName")
        kubernetes.set_image_pull_secrets(task, ["regcred"])
        kubernetes.add_pod_label(task, "team", "vision")
        kubernetes.add_pod_annotation(task, "cluster-autoscaler.kubernetes.io/safe-to-evict", "false")
        kubernetes.empty_dir_mount(task, volume_name="scratch", mount_path="/scratch")  # the step's own scratch

    package = tmp_path_factory.mktemp("pipeline") / "pipeline.yaml"
    compiler.Compiler().compile(pipeline, package_path=str(package))
    return step_pod(package, "exec-kfp-allreduce", POD, NS)


def test_the_step_pod_is_a_pod_with_kfps_own_parts(pod: dict[str, Any]) -> None:
    """The fixture is a Pod every field of which the kubernetes client knows, and it holds the
    parts the template must leave out: otherwise the next tests would prove nothing."""
    api = k8s.ApiClient()
    back = api.sanitize_for_serialization(api._ApiClient__deserialize(copy.deepcopy(pod), "V1Pod"))
    expected = copy.deepcopy(pod)
    assert back["metadata"].pop("creationTimestamp") == "2025-06-02T10:00:00+00:00"  # the client's datetime
    expected["metadata"].pop("creationTimestamp")
    assert back == expected
    spec = pod["spec"]
    assert [c["name"] for c in spec["containers"]] == ["wait", "main"]
    main = spec["containers"][1]
    assert {"kfp-launcher", "var-run-argo", "scratch", CLAIM, "kube-api-access-7xk2p"} <= {v["name"] for v in
                                                                                            spec["volumes"]}
    assert {"KFP_POD_NAME", "ARGO_CONTAINER_NAME", "MLFLOW_TRACKING_URI"} <= {e["name"] for e in main["env"]}
    assert main["envFrom"] == [{"configMapRef": {"name": "metadata-grpc-configmap", "optional": True}}]
    assert {"pipelines.kubeflow.org/v2_component", "workflows.argoproj.io/workflow"} <= set(pod["metadata"]["labels"])
    assert len(spec["tolerations"]) == 3


def test_what_the_user_put_on_the_step_is_inherited(pod: dict[str, Any]) -> None:
    assert inherited_template(pod, mounted=[MOUNT]) == EXPECTED
    # the same from the client's model of the pod, as CoreV1Api hands it over when preloaded
    api = k8s.ApiClient()
    assert inherited_template(api.sanitize_for_serialization(api._ApiClient__deserialize(pod, "V1Pod")),
                              mounted=[MOUNT]) == EXPECTED
    # without distcomp's own mount of the shared volume, the step's mount of it comes along
    volumes = inherited_template(pod)["spec"]["volumes"]
    assert {"name": CLAIM, "persistentVolumeClaim": {"claimName": CLAIM}} in volumes
    assert load_template(EXPECTED) == EXPECTED  # the format --pod-template takes, every key checked


@pytest.mark.slow
@pytest.mark.parametrize("job", ["torch", "mpi", "tensorflow", "deepspeed"])
def test_the_settings_reach_every_replica(pod: dict[str, Any], job: str) -> None:
    """Merged by ``_settings.apply`` (JobSettings.pod_template) into each kind's job, with the
    shared volume distcomp mounts itself: valid against the CRD, nothing pruned, each pod valid."""
    spec = load(str(JOBS / job / "component.yaml")).with_overrides(nodes=2)
    manifest = compile_job(make_plan(spec, gpu=False, pm=get_plugin_manager()), bind_inputs(spec, {}, Path("/")), {n: f"{MOUNT}/out/{n}" for n in spec.outputs},
                           pm=get_plugin_manager(), image="registry.example/ddp:1", volumes={CLAIM: MOUNT},
                           settings=JobSettings(pod_template=load_template(inherited_template(pod, [MOUNT]))))
    validate(manifest)
    want = EXPECTED["spec"]
    for replica_type, replica in replica_specs(manifest).items():
        template = replica["template"]
        pod_spec, main = template["spec"], template["spec"]["containers"][0]
        assert template["metadata"] == EXPECTED["metadata"], replica_type
        for key in ("nodeSelector", "affinity", "serviceAccountName", "imagePullSecrets", "tolerations"):
            assert pod_spec[key] == want[key], (replica_type, key)
        names = [v["name"] for v in pod_spec["volumes"]]
        assert len(names) == len(set(names)) and {"datasets", "gcp-key", "train-config"} <= set(names)
        paths = [m["mountPath"] for m in main["volumeMounts"]]
        assert len(paths) == len(set(paths)) and {"/data", "/etc/gcp", "/etc/train", MOUNT} <= set(paths)
        mounted = {m["mountPath"]: m["name"] for m in main["volumeMounts"]}
        claims = {v["name"]: v.get("persistentVolumeClaim", {}).get("claimName") for v in pod_spec["volumes"]}
        assert claims[mounted[MOUNT]] == CLAIM  # distcomp's own mount of the shared volume, once
        env = {e["name"]: e for e in main["env"]}
        for e in want["containers"][0]["env"]:
            assert env[e["name"]] == e, (replica_type, e["name"])
        assert not [n for n in env if n.startswith(("KFP_", "ARGO_"))]
        assert not {"kfp-launcher", "var-run-argo", "scratch", "kube-api-access-7xk2p"} & set(names)
        assert main["command"]  # still distcomp's training command


def test_a_trainjob_gets_what_runtime_patches_carry(pod: dict[str, Any]) -> None:
    template, left = fit_trainjob(load_template(inherited_template(pod, [MOUNT])) or {})
    assert left == ["metadata.labels", "metadata.annotations"]
    manifest = distcomp.compile(str(JOBS / "torch" / "component.yaml"), "kubeflow", image="i:1", nodes=2,
                                trainer_v2=True, volumes={CLAIM: MOUNT}, pod_template=template).data
    validate(manifest)
    (patch,) = manifest["spec"]["runtimePatches"]
    (node,) = patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    pod_spec = node["template"]["spec"]["template"]["spec"]
    assert pod_spec["nodeSelector"] == {"accelerator": "nvidia-a100"} and pod_spec["affinity"] == EXPECTED["spec"][
        "affinity"]
    assert {"datasets", "gcp-key", "train-config"} <= {v["name"] for v in pod_spec["volumes"]}
    assert {e["name"] for e in manifest["spec"]["trainer"]["env"]} >= {"AWS_ACCESS_KEY_ID", "LR", "NODE_NAME"}


@pytest.mark.slow
def test_the_users_own_template_wins_and_nothing_comes_twice(pod: dict[str, Any]) -> None:
    given = load_template({"nodeSelector": {"accelerator": "h100"}, "serviceAccountName": "trainer",
                           "volumes": [{"name": "gcp-key", "secret": {"secretName": "gcp-key-v2"}}],
                           "containers": [{"env": [{"name": "LR", "value": "0.1"}],
                                           "volumeMounts": [{"name": "gcp-key", "mountPath": "/etc/gcp"},
                                                            {"name": "gcp-key", "mountPath": "/etc/train"}]}]})
    combined = load_template(combine(load_template(inherited_template(pod, [MOUNT])) or {}, given))
    manifest = distcomp.compile(str(JOBS / "torch" / "component.yaml"), "kubeflow", image="i:1", nodes=2,
                                volumes={CLAIM: MOUNT}, pod_template=combined).data
    validate(manifest)
    for replica in replica_specs(manifest).values():
        pod_spec, main = replica["template"]["spec"], replica["template"]["spec"]["containers"][0]
        assert pod_spec["nodeSelector"] == {"accelerator": "h100"} and pod_spec["serviceAccountName"] == "trainer"
        assert [v for v in pod_spec["volumes"] if v["name"] == "gcp-key"] == [
            {"name": "gcp-key", "secret": {"secretName": "gcp-key-v2"}}]
        assert "train-config" not in {v["name"] for v in pod_spec["volumes"]}  # its path is the user's now
        paths = [m["mountPath"] for m in main["volumeMounts"]]
        assert len(paths) == len(set(paths))
        assert [e for e in main["env"] if e["name"] == "LR"] == [{"name": "LR", "value": "0.1"}]
        assert pod_spec["tolerations"] == EXPECTED["spec"]["tolerations"]


# -- reading the pod through the Kubernetes API ----------------------------------------------
FORBIDDEN = (f'pods "{POD}" is forbidden: User "system:serviceaccount:{NS}:pipeline-runner" cannot get resource '
             f'"pods" in API group "" in the namespace "{NS}"')


class Api(FakeKube):
    """GET /api/v1/namespaces/NS/pods/NAME: the pod, or the API server's 403 or 404 Status."""

    def __init__(self, pod: dict[str, Any], answer: int = 200) -> None:
        self.paths: list[str] = []
        api = self

        class Handler(JsonHandler):
            def do_GET(self) -> None:
                api.paths.append(self.path)
                name = pod["metadata"]["name"]
                if self.path != f"/api/v1/namespaces/{NS}/pods/{name}" or answer == 404:
                    self._send(404, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound",
                                     "message": f'pods "{self.path.rsplit("/", 1)[-1]}" not found', "code": 404})
                elif answer == 403:
                    self._send(403, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Forbidden",
                                     "message": FORBIDDEN, "details": {"name": name, "kind": "pods"}, "code": 403})
                else:
                    self._send(200, pod)

        super().__init__(Handler)


@pytest.fixture
def in_pod(tmp_path: Path) -> Iterator[tuple[dict[str, str], str]]:
    """The step's environment: its host name and its service account's namespace file."""
    ns_file = tmp_path / "namespace"
    ns_file.write_text(NS + "\n", encoding="utf-8")
    yield {"HOSTNAME": POD}, str(ns_file)


def test_read_own_pod(pod: dict[str, Any]) -> None:
    with Api(pod) as api:
        assert read_own_pod(api.client(), POD, NS) == pod
    assert api.paths == [f"/api/v1/namespaces/{NS}/pods/{POD}"]


def test_a_forbidden_read_names_the_rule_to_add(pod: dict[str, Any]) -> None:
    with Api(pod, 403) as api, pytest.raises(distcomp.errors.UsageError) as info:
        read_own_pod(api.client(), POD, NS)
    assert str(info.value) == (
        f"--inherit-pod: the step's service account may not read its own pod {NS}/{POD} ({FORBIDDEN}); give it get "
        f"on pods in {NS}: a Role rule {{apiGroups: [\"\"], resources: [pods], verbs: [get]}} bound to it, e.g. "
        f"kubectl create role distcomp-read-pods --verb=get --resource=pods -n {NS} && kubectl create rolebinding "
        f"distcomp-read-pods --role=distcomp-read-pods --serviceaccount={NS}:pipeline-runner -n {NS}")


def test_a_pod_not_found_says_where_the_name_came_from(pod: dict[str, Any]) -> None:
    with Api(pod, 404) as api, pytest.raises(distcomp.errors.UsageError,
                                             match=rf'no pod {NS}/{POD} \(pods "{POD}" not found\); the step\'s pod '
                                                   r"name comes from POD_NAME, KFP_POD_NAME or HOSTNAME"):
        read_own_pod(api.client(), POD, NS)


def test_an_unreachable_api_is_a_clear_error() -> None:
    config = k8s.Configuration()
    config.host = "http://127.0.0.1:9"  # discard: nothing listens
    config.retries = False
    with pytest.raises(distcomp.errors.UsageError, match=f"cannot reach the Kubernetes API to read pod {NS}/{POD}"):
        read_own_pod(k8s.ApiClient(config), POD, NS)


def test_own_pod(tmp_path: Path, in_pod: tuple[dict[str, str], str]) -> None:
    env, ns_file = in_pod
    assert own_pod(env, ns_file) == (POD, NS)
    assert own_pod({**env, "KFP_POD_NAME": "kfp-name"}, ns_file) == ("kfp-name", NS)
    assert own_pod({**env, "KFP_POD_NAME": "kfp-name", "POD_NAME": "downward"}, ns_file) == ("downward", NS)
    assert own_pod({**env, "POD_NAMESPACE": "other"}, ns_file) == (POD, "other")
    assert own_pod(env, str(tmp_path / "absent")) is None  # not in a pod: no service account file
    assert own_pod({}, ns_file) is None


@pytest.mark.slow
def test_inherit_options_for_a_submit(pod: dict[str, Any], in_pod: tuple[dict[str, str], str]) -> None:
    """What ``--inherit-pod`` does: this pod's settings and the user's template, in the options."""
    env, ns_file = in_pod
    said: list[str] = []
    options = {"volumes": {CLAIM: MOUNT}, "pod_template": {"priorityClassName": "training"}}
    with Api(pod) as api:
        result = inherit_options(options, api.client(), said.append, env, ns_file)
    assert options == {"volumes": {CLAIM: MOUNT}, "pod_template": {"priorityClassName": "training"}}  # not changed
    assert result["volumes"] == {CLAIM: MOUNT}
    assert result["pod_template"]["spec"] == {**EXPECTED["spec"], "priorityClassName": "training"}
    assert result["pod_template"]["metadata"] == EXPECTED["metadata"]
    assert said == [f"--inherit-pod: from pod {NS}/{POD} the training pods get nodeSelector, affinity, "
                    f"serviceAccountName, imagePullSecrets, tolerations; volumes datasets, gcp-key, train-config; "
                    f"env AWS_ACCESS_KEY_ID, LR, NODE_NAME; labels team; annotations "
                    f"cluster-autoscaler.kubernetes.io/safe-to-evict"]
    manifest = distcomp.compile(str(JOBS / "mpi" / "component.yaml"), "kubeflow", image="i:1", nodes=2,
                                volumes=result["volumes"], pod_template=result["pod_template"]).data
    validate(manifest)
    launcher = replica_specs(manifest)["Launcher"]["template"]["spec"]["containers"][0]["command"]
    assert launcher[launcher.index("AWS_ACCESS_KEY_ID") - 1] == "-x"  # mpirun forwards the secret's env to ranks

    said.clear()
    with Api(pod) as api:
        result = inherit_options({"trainer_v2": True, "volumes": {CLAIM: MOUNT}}, api.client(), said.append, env,
                                 ns_file)
    assert result["pod_template"]["metadata"] == {}
    assert said[0] == (f"--inherit-pod: a TrainJob's runtimePatches cannot carry metadata.annotations, "
                       f"metadata.labels of pod {NS}/{POD}: set them in the training runtime")


def test_inherit_options_outside_a_pod(tmp_path: Path) -> None:
    absent = str(tmp_path / "namespace")
    with pytest.raises(distcomp.errors.UsageError,
                       match=rf"--inherit-pod passes on the settings of the pod it runs in \(a KFP step's\): this is "
                             rf"no pod \(no {absent}, no POD_NAMESPACE\)"):
        inherit_options({}, None, print, {"HOSTNAME": "laptop"}, absent)


def test_a_pod_of_other_shapes(pod: dict[str, Any]) -> None:
    """A pod with no KFP in it (its single container), and an empty one, give what they hold."""
    bare = {"metadata": {"labels": {"app": "x", "pod-template-hash": "abc"}},
            "spec": {"containers": [{"name": "trainer", "envFrom": [{"secretRef": {"name": "creds"}}],
                                     "env": [{"name": "PLAIN", "value": "1"}]}],
                     "priorityClassName": "high"}}
    assert inherited_template(bare) == {"metadata": {"labels": {"app": "x"}},
                                        "spec": {"priorityClassName": "high",
                                                 "containers": [{"envFrom": [{"secretRef": {"name": "creds"}}]}]}}
    assert inherited_template({"spec": {}}) == {"metadata": {}, "spec": {}}
    before = json.dumps(pod)
    taken = inherited_template(pod)
    taken["spec"]["volumes"][0]["name"] = "changed"
    taken["spec"]["containers"][0]["env"][0]["valueFrom"]["secretKeyRef"]["key"] = "changed"
    assert json.dumps(pod) == before  # a copy: the caller's pod is not changed through it
