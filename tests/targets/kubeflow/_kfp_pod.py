"""The Pod that runs a task of a compiled KFP v2 pipeline, built here as the KFP backend (on
Argo Workflows) and the Kubernetes API server would build it: the step's pod whose settings
``--inherit-pod`` reads (there is no cluster here).

The task's kfp-kubernetes settings are read from the compiled pipeline's platform spec
(``platforms.kubernetes.deploymentSpec.executors``) into kfp-kubernetes' own proto
(``KubernetesExecutorConfig``), and put on the pod as the KFP backend does, read in
kubeflow/pipelines (master, 2025):

- backend/src/v2/compiler/argocompiler/container.go, ``addContainerExecutorTemplate`` (commit
  00f7b52b): the executor template: volumes ``kfp-launcher`` and the scratch emptyDirs
  (``gcs-scratch`` ... ``dot-config-scratch``), init container ``kfp-launcher``, the main
  container's mounts of them, ``envFrom`` the optional ``metadata-grpc-configmap``, and
  ``extendPodMetadata``: ``add_pod_label``/``add_pod_annotation`` as the pod's metadata;
- backend/src/v2/compiler/argocompiler/common.go (commit 09d8fdf5): ``commonEnvs``,
  KFP_POD_NAME and KFP_POD_UID from the downward API;
- backend/src/v2/driver/container.go, ``initPodSpecPatch``: the pod spec patch's container
  ``main`` (image, launcher command, the task's plain env from ``set_env_variable``);
- backend/src/v2/driver/k8s.go, ``extendPodSpecPatch`` (commit 008dcd63): pvcMount -> a volume
  named as the claim and its mount; nodeSelector.labels -> nodeSelector; tolerations;
  secretAsVolume/configMapAsVolume -> a volume named as the secret/config map (``optional``
  set) and its mount; secretAsEnv/configMapAsEnv -> env ``valueFrom`` a key ref;
  imagePullSecret -> imagePullSecrets; fieldPathAsEnv -> env ``valueFrom.fieldRef``;
  emptyDirMounts -> an emptyDir and its mount; nodeAffinity matchExpressions (no weight) ->
  ``requiredDuringSchedulingIgnoredDuringExecution`` terms; always on ``containers[0]``,
  the patch's ``main``.

Argo Workflows (argoproj/argo-workflows workflow/controller/workflowpod.go,
``createWorkflowPod``) adds its ``wait`` container before ``main``, its ``init`` container,
``var-run-argo`` mounted in every container, the emissary command prefix, ARGO_* env, its
labels and annotations, the workflow's pod metadata (KFP: ``pipelines.kubeflow.org/v2_component``)
and service account (KFP: ``pipeline-runner``); then it strategic-merges the driver's patch.
The API server's admission then adds the service account token volume (``kube-api-access-*``),
the default ``not-ready``/``unreachable`` tolerations and the defaulted fields.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

KFP_SCRATCH = [("gcs-scratch", "/gcs"), ("s3-scratch", "/s3"), ("minio-scratch", "/minio"),
               ("dot-local-scratch", "/.local"), ("dot-cache-scratch", "/.cache"), ("dot-config-scratch", "/.config")]
TOKEN = {"name": "kube-api-access-7xk2p", "projected": {"defaultMode": 420, "sources": [
    {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
    {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
    {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1",
                                                                  "fieldPath": "metadata.namespace"}}]}}]}}
TOKEN_MOUNT = {"name": TOKEN["name"], "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": True}
VAR_RUN_ARGO = {"name": "var-run-argo", "mountPath": "/var/run/argo"}


def executor_config(package: Path, executor: str) -> Any:
    """The task's kfp-kubernetes settings from a compiled pipeline, as KFP's own proto."""
    from google.protobuf import json_format
    from kfp.kubernetes import kubernetes_executor_config_pb2 as pb

    docs = list(yaml.safe_load_all(package.read_text(encoding="utf-8")))
    platform = docs[1]["platforms"]["kubernetes"]["deploymentSpec"]["executors"][executor]
    return docs[0], json_format.ParseDict(platform, pb.KubernetesExecutorConfig())


def _env_ref(kind: str, name: str, key: str, optional: bool | None) -> dict[str, Any]:
    ref: dict[str, Any] = {"key": key, "name": name}
    if optional is not None:
        ref["optional"] = optional
    return {kind: ref}


def driver_patch(pipeline: dict[str, Any], executor: str, cfg: Any) -> dict[str, Any]:
    """The pod spec patch the driver writes: initPodSpecPatch, then extendPodSpecPatch."""
    container = pipeline["deploymentSpec"]["executors"][executor]["container"]
    main: dict[str, Any] = {
        "name": "main", "image": container["image"],
        "command": ["/kfp-launcher/launch", "--pipeline_name", "p", "--run_id", "0e5f", "--execution_id", "42",
                    "--executor_input", "{}", "--component_spec", "{}", "--pod_name", "$(KFP_POD_NAME)",
                    "--pod_uid", "$(KFP_POD_UID)", "--mlmd_server_address", "metadata-grpc-service.kubeflow",
                    "--mlmd_server_port", "8080", "--publish_logs", "true", "--"],
        "args": container["command"] + container["args"],
        "env": [{"name": e["name"], "value": e["value"]} for e in container.get("env") or []],
        "volumeMounts": []}
    patch: dict[str, Any] = {"containers": [main], "volumes": []}
    for m in cfg.pvc_mount:
        name = m.pvc_name_parameter.runtime_value.constant.string_value or m.constant
        patch["volumes"].append({"name": name, "persistentVolumeClaim": {"claimName": name}})
        main["volumeMounts"].append({"name": name, "mountPath": m.mount_path, **({"subPath": m.sub_path}
                                                                                  if m.sub_path else {})})
    if cfg.HasField("node_selector"):
        patch["nodeSelector"] = dict(cfg.node_selector.labels)
    if cfg.tolerations:
        patch["tolerations"] = [{k: v for k, v in (("key", t.key), ("operator", t.operator), ("value", t.value),
                                                   ("effect", t.effect)) if v}
                                | ({"tolerationSeconds": t.toleration_seconds}
                                   if t.HasField("toleration_seconds") else {})
                                for t in cfg.tolerations]
    for s in cfg.secret_as_volume:
        patch["volumes"].append({"name": s.secret_name, "secret": {"secretName": s.secret_name,
                                                                   "optional": bool(s.optional)}})
        main["volumeMounts"].append({"name": s.secret_name, "mountPath": s.mount_path})
    for s in cfg.secret_as_env:
        optional = s.optional if s.HasField("optional") else None
        main["env"] += [{"name": k.env_var, "valueFrom": _env_ref("secretKeyRef", s.secret_name, k.secret_key,
                                                                  optional)} for k in s.key_to_env]
    for c in cfg.config_map_as_volume:
        patch["volumes"].append({"name": c.config_map_name, "configMap": {"name": c.config_map_name,
                                                                          "optional": bool(c.optional)}})
        main["volumeMounts"].append({"name": c.config_map_name, "mountPath": c.mount_path})
    for c in cfg.config_map_as_env:
        optional = c.optional if c.HasField("optional") else None
        main["env"] += [{"name": k.env_var, "valueFrom": _env_ref("configMapKeyRef", c.config_map_name,
                                                                  k.config_map_key, optional)} for k in c.key_to_env]
    if cfg.image_pull_secret:
        patch["imagePullSecrets"] = [{"name": s.secret_name} for s in cfg.image_pull_secret]
    for f in cfg.field_path_as_env:
        main["env"].append({"name": f.name, "valueFrom": {"fieldRef": {"fieldPath": f.field_path}}})
    for e in cfg.empty_dir_mounts:
        patch["volumes"].append({"name": e.volume_name, "emptyDir": {k: v for k, v in (
            ("medium", e.medium), ("sizeLimit", e.size_limit)) if v}})
        main["volumeMounts"].append({"name": e.volume_name, "mountPath": e.mount_path})
    terms = [{"matchExpressions": [{"key": x.key, "operator": x.operator, "values": list(x.values)}
                                   for x in t.match_expressions]} for t in cfg.node_affinity if not t.HasField("weight")]
    if terms:
        patch["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": terms}}}
    return patch


def _argo_env(container: str) -> list[dict[str, Any]]:
    return [{"name": "ARGO_CONTAINER_NAME", "value": container}, {"name": "ARGO_TEMPLATE", "value": "{}"},
            {"name": "ARGO_NODE_ID", "value": "p-8k2dq-3791405512"}, {"name": "ARGO_INCLUDE_SCRIPT_OUTPUT",
                                                                     "value": "false"},
            {"name": "ARGO_DEADLINE", "value": "0001-01-01T00:00:00Z"},
            {"name": "ARGO_PROGRESS_FILE", "value": "/var/run/argo/progress"}]


def step_pod(package: Path, executor: str, name: str = "p-8k2dq-system-container-impl-3791405512",
             namespace: str = "kubeflow-user") -> dict[str, Any]:
    """The task's pod as the API server returns it (GET), without its status."""
    pipeline, cfg = executor_config(package, executor)
    patch = driver_patch(pipeline, executor, cfg)
    p_main = patch.pop("containers")[0]
    # Argo's pod from KFP's executor template, before the patch
    main = {"name": "main", "image": "gcr.io/ml-pipeline/should-be-overridden-during-runtime",
            "command": ["/var/run/argo/argoexec", "emissary", "--", "should-be-overridden-during-runtime"],
            "env": [{"name": "KFP_POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                    {"name": "KFP_POD_UID", "valueFrom": {"fieldRef": {"fieldPath": "metadata.uid"}}},
                    *_argo_env("main")],
            "envFrom": [{"configMapRef": {"name": "metadata-grpc-configmap", "optional": True}}],
            "volumeMounts": [{"name": "kfp-launcher", "mountPath": "/kfp-launcher"},
                             *({"name": n, "mountPath": p} for n, p in KFP_SCRATCH), dict(VAR_RUN_ARGO)]}
    wait = {"name": "wait", "image": "quay.io/argoproj/argoexec:v3.5.14",
            "command": ["argoexec", "wait", "--loglevel", "info", "--log-format", "text"],
            "env": [{"name": "ARGO_POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                    {"name": "ARGO_POD_UID", "valueFrom": {"fieldRef": {"fieldPath": "metadata.uid"}}},
                    {"name": "GODEBUG", "value": "x509ignoreCN=0"}, *_argo_env("wait")],
            "volumeMounts": [dict(VAR_RUN_ARGO)]}
    init = [{"name": "init", "image": "quay.io/argoproj/argoexec:v3.5.14",
             "command": ["argoexec", "init", "--loglevel", "info", "--log-format", "text"],
             "env": _argo_env("init"), "volumeMounts": [dict(VAR_RUN_ARGO)]},
            {"name": "kfp-launcher", "image": "ghcr.io/kubeflow/kfp-launcher:2.5.0", "command": ["launcher-v2"],
             "args": ["--copy", "/kfp-launcher/launch"],
             "resources": {"limits": {"cpu": "500m", "memory": "128Mi"}, "requests": {"cpu": "100m"}},
             "volumeMounts": [{"name": "kfp-launcher", "mountPath": "/kfp-launcher"}, dict(VAR_RUN_ARGO)]}]
    # the driver's patch, strategic-merged: main by name, env by name, mounts by path, volumes by name
    main["image"], main["command"], main["args"] = p_main["image"], p_main["command"], p_main["args"]
    main["env"] = [e for e in main["env"] if e["name"] not in {x["name"] for x in p_main["env"]}] + p_main["env"]
    main["volumeMounts"] += p_main["volumeMounts"]
    spec: dict[str, Any] = {
        "volumes": [{"name": "kfp-launcher", "emptyDir": {}}, *({"name": n, "emptyDir": {}} for n, _ in KFP_SCRATCH),
                    {"name": "var-run-argo", "emptyDir": {}}, *patch.pop("volumes")],
        "initContainers": init, "containers": [wait, main], "restartPolicy": "Never",
        "serviceAccountName": "pipeline-runner", **patch}
    # the API server: the token volume in every container, defaulted fields
    spec["volumes"].append(copy.deepcopy(TOKEN))
    for c in spec["initContainers"] + spec["containers"]:
        c["volumeMounts"].append(dict(TOKEN_MOUNT))
        c.update(imagePullPolicy="IfNotPresent", terminationMessagePath="/dev/termination-log",
                 terminationMessagePolicy="File")
        for e in c.get("env") or []:
            if "fieldRef" in e.get("valueFrom", {}):
                e["valueFrom"]["fieldRef"]["apiVersion"] = "v1"
    spec["tolerations"] = spec.get("tolerations", []) + [
        {"key": k, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
        for k in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")]
    spec.update(serviceAccount="pipeline-runner", dnsPolicy="ClusterFirst", enableServiceLinks=True,
                schedulerName="default-scheduler", securityContext={}, terminationGracePeriodSeconds=30,
                preemptionPolicy="PreemptLowerPriority", priority=0, nodeName="gpu-node-3")
    labels = {"workflows.argoproj.io/workflow": "p-8k2dq", "workflows.argoproj.io/completed": "false",
              "pipelines.kubeflow.org/v2_component": "true", "pipeline/runid": "0e5f0c1a-7d1f-4c57-a5b1-8b8f2f6d7a10",
              **dict(cfg.pod_metadata.labels)}
    annotations = {"workflows.argoproj.io/node-name": "p-8k2dq.root.kfp-allreduce.executor",
                   "workflows.argoproj.io/node-id": "p-8k2dq-3791405512",
                   "kubectl.kubernetes.io/default-container": "main",
                   "pipelines.kubeflow.org/v2_component": "true", **dict(cfg.pod_metadata.annotations)}
    metadata = {"name": name, "namespace": namespace, "uid": "5b0f6a1e-3c7d-4f7e-9a55-2f0c9d1b8e21",
                "resourceVersion": "918273", "creationTimestamp": "2025-06-02T10:00:00Z",
                "labels": labels, "annotations": annotations,
                "ownerReferences": [{"apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow", "name": "p-8k2dq",
                                     "uid": "a1b2c3d4-0000-4000-8000-000000000001", "controller": True,
                                     "blockOwnerDeletion": True}]}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}
