"""The KFP step's own pod settings, passed on to the training pods it creates (``--inherit-pod``).

In a KFP pipeline the user sets pod settings on the step with kfp-kubernetes. The KFP driver
puts them on the step's pod only; the multi-node step then runs ``distcomp submit`` inside that
pod, and the training pods would get none of them. So the step reads its own pod through the
Kubernetes API and turns what the user put there into a partial pod template (the format of
``_podtemplate.load``) merged into every replica.

Taken, because the training pods need them as much as the step does:

- ``nodeSelector``, ``affinity``, ``tolerations``, ``priorityClassName``: where the pods may run
  (``add_node_selector``, ``add_node_affinity``, ``add_toleration``);
- ``imagePullSecrets``: how to pull the image (``set_image_pull_secrets``);
- ``serviceAccountName``: the identity the pods act as, e.g. workload identity for a bucket;
- the main container's env entries that take their value from elsewhere (``valueFrom``: a
  secret or config map key, ``use_secret_as_env``/``use_config_map_as_env``, or a field of the
  pod, ``use_field_path_as_env``, which each pod evaluates for itself) and its ``envFrom``;
- secret, config map and PersistentVolumeClaim volumes with the main container's mounts of
  them (``use_secret_as_volume``, ``use_config_map_as_volume``, ``mount_pvc``);
- labels and annotations (``add_pod_label``, ``add_pod_annotation``).

Left out, because KFP, Argo or Kubernetes put them there, or they are per pod:

- KFP's and Argo's volumes (``kfp-launcher``, ``var-run-argo`` and the scratch emptyDirs), the
  run's ``kfp-workspace`` claim, the service account token (a projected volume, which Kubernetes
  gives every pod again), and every emptyDir or ephemeral volume (``empty_dir_mount``,
  ``add_ephemeral_volume``): scratch space of the step's own; distcomp gives the training pods
  their own ``/dev/shm`` (``--shm-size``);
- the step's mount of a path that distcomp mounts itself (``mounted``: the ``--volume`` paths,
  the shared volume the step and the pods both mount): two mounts at one path make an invalid pod;
- env with a plain ``value``: the step's own (``set_env_variable``, the proxy settings, Argo's
  ``ARGO_*``), which cannot be told apart in the pod; distcomp passes what the ranks need;
  env named ``KFP_*`` or ``ARGO_*`` (KFP_POD_NAME, ...); KFP's ``metadata-grpc-configmap`` envFrom;
- the tolerations Kubernetes adds to every pod (``node.kubernetes.io/not-ready`` and
  ``unreachable`` for 300 s): it adds them to the training pods too;
- labels and annotations of KFP (``pipelines.kubeflow.org/*``, ``pipeline/runid``), Argo
  (``workflows.argoproj.io/*``), Kubernetes and its controllers (``kubernetes.io``,
  ``pod-template-hash``, ...), the training operators, Istio's injector (``sidecar.istio.io/status``
  would stop it injecting the training pods) and Kubeflow's PodDefault webhook;
- the rest of the pod spec (securityContext, image pull policy, resources, init containers):
  KFP and its admins set them for the step's own container; distcomp's options set the pods'.

Reading the pod needs ``get`` on ``pods`` for the step's service account, which a narrowly
bound one may lack; then the error says which rule to add.
"""

from __future__ import annotations

import copy
import json
import os
import re
from typing import Any, Callable, Collection, Mapping

from ...errors import UsageError

NAMESPACE_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"
FLAG = "--inherit-pod"

POD_KEYS = ("nodeSelector", "affinity", "priorityClassName", "serviceAccountName", "imagePullSecrets")
VOLUME_KINDS = ("secret", "configMap", "persistentVolumeClaim")
KFP_VOLUMES = {"kfp-workspace"}  # a claim, but KFP's own for the run (dsl.PipelineConfig workspace)
ENV_PREFIXES = ("KFP_", "ARGO_")
KFP_ENV_FROM = {"metadata-grpc-configmap"}
DEFAULT_TOLERATIONS = {"node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"}
# label/annotation key prefixes and whole keys that KFP, Argo, Kubernetes, its controllers and
# webhooks set; other *.kubernetes.io keys stay (cluster-autoscaler.kubernetes.io/safe-to-evict
# is the user's word)
OWNED_PREFIXES = ("pipelines.kubeflow.org/", "workflows.argoproj.io/", "training.kubeflow.org/",
                  "trainer.kubeflow.org/", "jobset.sigs.k8s.io/", "poddefault.admission.kubeflow.org/",
                  "security.istio.io/", "service.istio.io/", "istio.io/", "cni.projectcalico.org/",
                  "kubernetes.io/", "k8s.io/", "kubectl.kubernetes.io/", "batch.kubernetes.io/",
                  "statefulset.kubernetes.io/", "apps.kubernetes.io/", "openshift.io/")
OWNED_KEYS = {"pipeline/runid", "pod-template-hash", "controller-revision-hash", "controller-uid", "job-name",
              "sidecar.istio.io/status", "k8s.v1.cni.cncf.io/network-status", "k8s.v1.cni.cncf.io/networks-status"}


def own_pod(environ: Mapping[str, str] | None = None,
            namespace_file: str = NAMESPACE_FILE) -> tuple[str, str] | None:
    """This pod's name and namespace, or None outside a pod. The name: ``POD_NAME`` (the
    downward API), KFP's ``KFP_POD_NAME``, else ``HOSTNAME`` (a pod's host name is its name
    unless its spec says otherwise); the namespace: ``POD_NAMESPACE``, else the service
    account's namespace file, which only a pod has."""
    env = os.environ if environ is None else environ
    name = env.get("POD_NAME") or env.get("KFP_POD_NAME") or env.get("HOSTNAME")
    namespace = env.get("POD_NAMESPACE")
    if not namespace:
        try:
            with open(namespace_file, encoding="utf-8") as f:
                namespace = f.read().strip()
        except OSError:
            return None
    return (name, namespace) if name and namespace else None


def read_own_pod(api_client: Any, name: str, namespace: str) -> dict[str, Any]:
    """The Pod object ``namespace/name`` as the API server gives it (JSON, camelCase keys)."""
    from kubernetes.client import CoreV1Api
    from kubernetes.client.exceptions import ApiException
    from urllib3.exceptions import HTTPError

    try:  # the raw JSON: fields newer than this client's models are kept
        response = CoreV1Api(api_client).read_namespaced_pod(name, namespace, _preload_content=False)
        pod = json.loads(response.data)
    except ApiException as exc:
        said = _message(exc.body) or f"{exc.status} {exc.reason}"
        if exc.status == 403:
            account = re.search(r"system:serviceaccount:([^:\s\"]+):([^\s\"]+)", said)
            who = f"{account.group(1)}:{account.group(2)}" if account else f"{namespace}:SERVICE_ACCOUNT"
            raise UsageError(
                f"{FLAG}: the step's service account may not read its own pod {namespace}/{name} ({said}); "
                f"give it get on pods in {namespace}: a Role rule {{apiGroups: [\"\"], resources: [pods], verbs: "
                f"[get]}} bound to it, e.g. kubectl create role distcomp-read-pods --verb=get --resource=pods "
                f"-n {namespace} && kubectl create rolebinding distcomp-read-pods --role=distcomp-read-pods "
                f"--serviceaccount={who} -n {namespace}") from None
        if exc.status == 404:
            raise UsageError(f"{FLAG}: no pod {namespace}/{name} ({said}); the step's pod name comes from POD_NAME, "
                             f"KFP_POD_NAME or HOSTNAME: set POD_NAME from the downward API (metadata.name)") from None
        raise UsageError(f"{FLAG}: reading pod {namespace}/{name}: {said}") from None
    except (OSError, HTTPError) as exc:  # urllib3's connection errors are not OSErrors
        raise UsageError(f"{FLAG}: cannot reach the Kubernetes API to read pod {namespace}/{name}: {exc}") from None
    except ValueError as exc:
        raise UsageError(f"{FLAG}: pod {namespace}/{name}: the API answered no JSON ({exc})") from None
    if not isinstance(pod, dict) or not isinstance(pod.get("spec"), dict):
        raise UsageError(f"{FLAG}: pod {namespace}/{name}: the API answered no Pod")
    return pod


def _message(body: Any) -> str:
    try:
        return str(json.loads(body).get("message") or "")
    except (TypeError, ValueError, AttributeError):
        return str(body or "")[:300]


def _owned(key: str) -> bool:
    return key in OWNED_KEYS or key.startswith(OWNED_PREFIXES)


def _main(spec: Mapping[str, Any], meta: Mapping[str, Any]) -> Mapping[str, Any]:
    """The user's container: Argo's is named ``main`` (its ``wait`` sidecar comes first)."""
    containers = [c for c in spec.get("containers") or [] if isinstance(c, Mapping)]
    wanted = (meta.get("annotations") or {}).get("kubectl.kubernetes.io/default-container", "main")
    for c in containers:
        if c.get("name") == wanted:
            return c
    others = [c for c in containers if c.get("name") != "wait"]
    return others[0] if others else {}


def _default_toleration(t: Mapping[str, Any]) -> bool:
    """One of the two that Kubernetes' DefaultTolerationSeconds admission adds to every pod."""
    return (t.get("key") in DEFAULT_TOLERATIONS and t.get("operator") == "Exists" and t.get("effect") == "NoExecute"
            and t.get("tolerationSeconds") == 300)


def _env_taken(e: Mapping[str, Any]) -> bool:
    return "valueFrom" in e and not str(e.get("name", "")).startswith(ENV_PREFIXES)


def _env_from_taken(e: Mapping[str, Any]) -> bool:
    ref = e.get("configMapRef") or e.get("secretRef") or {}
    return not (e.get("configMapRef") and ref.get("name") in KFP_ENV_FROM)


def inherited_template(pod: Mapping[str, Any], mounted: Collection[str] = ()) -> dict[str, Any]:
    """What the user put on ``pod`` (a Pod object as JSON) that the training pods need, as a
    partial pod template ``{"metadata": {...}, "spec": {...}}`` for ``_podtemplate.load``.
    ``mounted``: mount paths distcomp mounts in the training pods itself (``--volume``); the
    step's own mounts there are left out. See the module's docstring for what is taken."""
    meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
    out: dict[str, Any] = {key: copy.deepcopy(spec[key]) for key in POD_KEYS if spec.get(key)}
    tolerations = [copy.deepcopy(t) for t in spec.get("tolerations") or [] if not _default_toleration(t)]
    if tolerations:
        out["tolerations"] = tolerations

    main = _main(spec, meta)
    volumes = {v["name"]: v for v in spec.get("volumes") or []
               if v.get("name") not in KFP_VOLUMES and any(k in v for k in VOLUME_KINDS)}
    mounts = [copy.deepcopy(m) for m in main.get("volumeMounts") or []
              if m.get("name") in volumes and m.get("mountPath") not in mounted]
    used = {m["name"] for m in mounts}
    if used:  # in the pod's order; a volume no mount kept stays behind
        out["volumes"] = [copy.deepcopy(v) for name, v in volumes.items() if name in used]
    container: dict[str, Any] = {}
    env = [copy.deepcopy(e) for e in main.get("env") or [] if _env_taken(e)]
    env_from = [copy.deepcopy(e) for e in main.get("envFrom") or [] if _env_from_taken(e)]
    for key, value in (("env", env), ("envFrom", env_from), ("volumeMounts", mounts)):
        if value:
            container[key] = value
    if container:  # unnamed: merged into each replica's training container
        out["containers"] = [container]

    metadata = {}
    for key in ("labels", "annotations"):
        kept = {k: v for k, v in (meta.get(key) or {}).items() if not _owned(k)}
        if kept:
            metadata[key] = kept
    return {"metadata": metadata, "spec": out}


def combine(inherited: Mapping[str, Any], given: Mapping[str, Any] | None) -> dict[str, Any]:
    """``inherited`` with the user's own ``--pod-template`` (both as ``_podtemplate.load``
    returns them) on top: the user's word wins (mappings merge, scalars replace), lists append,
    and an inherited mount of a volume the user's template also names, or at a path it mounts,
    is dropped with its volume, so that none is there twice."""
    from ._podtemplate import _merge

    result = copy.deepcopy(dict(inherited))
    if not given:
        return result
    spec = result["spec"]
    names = {v.get("name") for v in given["spec"].get("volumes") or []}
    paths = {m.get("mountPath") for c in given["spec"].get("containers") or [] for m in c.get("volumeMounts") or []}
    names |= {m.get("name") for c in given["spec"].get("containers") or [] for m in c.get("volumeMounts") or []}
    used = set()
    for c in spec.get("containers") or []:
        if "volumeMounts" in c:
            c["volumeMounts"] = [m for m in c["volumeMounts"] if m.get("name") not in names
                                 and m.get("mountPath") not in paths]
            used |= {m.get("name") for m in c["volumeMounts"]}
    if "volumes" in spec:  # an inherited volume comes with its mount: without it, it stays behind
        spec["volumes"] = [v for v in spec["volumes"] if v.get("name") in used]
    _merge(result, copy.deepcopy(dict(given)))
    return result


def fit_trainjob(template: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """``template`` cut to what a TrainJob's runtimePatches carry, and the names of what was cut
    (labels and annotations, envFrom, priorityClassName...: the runtime sets those)."""
    from ._podtemplate import TRAINJOB_CONTAINER, TRAINJOB_POD

    left = [f"metadata.{k}" for k in template.get("metadata") or {}]
    spec: dict[str, Any] = {}
    for key, value in template["spec"].items():
        if key not in TRAINJOB_POD:
            left.append(key)
        elif key != "containers":
            spec[key] = copy.deepcopy(value)
    containers = []
    for c in template["spec"].get("containers") or []:
        left += [f"containers[].{k}" for k in c if k not in TRAINJOB_CONTAINER]
        kept = {k: copy.deepcopy(v) for k, v in c.items() if k in TRAINJOB_CONTAINER}
        if kept:
            containers.append(kept)
    if containers:
        spec["containers"] = containers
    return {"metadata": {}, "spec": spec}, left


def inherit_options(options: Mapping[str, Any], api_client: Any, notify: Callable[[str], None],
                    environ: Mapping[str, str] | None = None,
                    namespace_file: str = NAMESPACE_FILE) -> dict[str, Any]:
    """``options`` (the kubeflow target's) with ``pod_template`` set to this pod's settings
    combined with the user's own template: what ``--inherit-pod`` does when submitting."""
    from ._podtemplate import load

    found = own_pod(environ, namespace_file)
    if found is None:
        raise UsageError(f"{FLAG} passes on the settings of the pod it runs in (a KFP step's): this is no pod "
                         f"(no {namespace_file}, no POD_NAMESPACE)")
    name, namespace = found
    paths = [str(p) for p in (options.get("volumes") or {}).values()]
    inherited = load(inherited_template(read_own_pod(api_client, name, namespace), paths))
    assert inherited is not None
    if options.get("trainer_v2"):  # the user's own template is checked as it is, by the compile
        inherited, left = fit_trainjob(inherited)
        if left:
            notify(f"{FLAG}: a TrainJob's runtimePatches cannot carry {', '.join(sorted(set(left)))} of pod "
                   f"{namespace}/{name}: set them in the training runtime")
    notify(f"{FLAG}: from pod {namespace}/{name} the training pods get {describe(inherited)}")
    return {**options, "pod_template": combine(inherited, load(options.get("pod_template")))}


def describe(template: Mapping[str, Any]) -> str:
    """What ``template`` sets, in a line: its pod fields, volumes, env and metadata by name."""
    spec = template["spec"]
    fields = [k for k in spec if k not in ("containers", "volumes")]
    parts = [", ".join(fields)] if fields else []
    if spec.get("volumes"):
        parts.append("volumes " + ", ".join(str(v.get("name")) for v in spec["volumes"]))
    env = [str(e.get("name")) for c in spec.get("containers") or [] for e in c.get("env") or []]
    if env:
        parts.append("env " + ", ".join(env))
    env_from = [str((e.get("secretRef") or e.get("configMapRef") or {}).get("name"))
                for c in spec.get("containers") or [] for e in c.get("envFrom") or []]
    if env_from:
        parts.append("env from " + ", ".join(env_from))
    for key in ("labels", "annotations"):
        if template["metadata"].get(key):
            parts.append(f"{key} " + ", ".join(template["metadata"][key]))
    return "; ".join(parts) or "nothing (no settings of the user's on it)"
