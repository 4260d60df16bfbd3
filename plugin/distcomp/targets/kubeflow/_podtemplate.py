"""A partial pod template merged into every replica: node selector, tolerations, affinity,
image pull secrets, service account, env from secrets and config maps, extra volumes and mounts.

Given as a YAML file (``--pod-template FILE``) or a mapping (``distcomp.compile(spec, "kubeflow",
pod_template={...})``): a pod spec, or a pod template (``metadata:`` labels/annotations and
``spec:``). Every key is checked against Kubernetes' PodSpec and Container fields, so a typo is
an error naming it instead of a field the API server silently prunes. Mappings merge, lists
append (an ``env`` entry replaces distcomp's of the same name), other values replace; a
``containers`` entry named as the training container, or unnamed, merges into it."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, Mapping

from ...core.target import TargetOption
from ._errors import CompileError

# Kubernetes' PodSpec and Container fields (kubernetes client 31, the training operators' CRDs)
POD_FIELDS = (
    "activeDeadlineSeconds", "affinity", "automountServiceAccountToken", "containers", "dnsConfig", "dnsPolicy",
    "enableServiceLinks", "ephemeralContainers", "hostAliases", "hostIPC", "hostNetwork", "hostPID", "hostUsers",
    "hostname", "imagePullSecrets", "initContainers", "nodeName", "nodeSelector", "os", "overhead",
    "preemptionPolicy", "priority", "priorityClassName", "readinessGates", "resourceClaims", "restartPolicy",
    "runtimeClassName", "schedulerName", "schedulingGates", "securityContext", "serviceAccount",
    "serviceAccountName", "setHostnameAsFQDN", "shareProcessNamespace", "subdomain", "terminationGracePeriodSeconds",
    "tolerations", "topologySpreadConstraints", "volumes")
CONTAINER_FIELDS = (
    "args", "command", "env", "envFrom", "image", "imagePullPolicy", "lifecycle", "livenessProbe", "name", "ports",
    "readinessProbe", "resizePolicy", "resources", "restartPolicy", "securityContext", "startupProbe", "stdin",
    "stdinOnce", "terminationMessagePath", "terminationMessagePolicy", "tty", "volumeDevices", "volumeMounts",
    "workingDir")
# what distcomp sets from the spec and its own options: a template that set them would break the job
OWNED_POD = {"restartPolicy": "the operator sets it per replica (--restart-policy)"}
OWNED_CONTAINER = {"command": "it is the spec's command", "args": "it is the spec's command",
                   "image": "give --image"}
# what a TrainJob's runtimePatches carry (Trainer's CRD): the rest stays the runtime's
TRAINJOB_POD = ("affinity", "containers", "imagePullSecrets", "initContainers", "nodeSelector", "schedulingGates",
                "securityContext", "serviceAccountName", "terminationGracePeriodSeconds", "tolerations", "volumes")
TRAINJOB_CONTAINER = ("env", "name", "securityContext", "volumeMounts")
METADATA = ("labels", "annotations")


class PodTemplateOption(TargetOption):
    """``--pod-template FILE`` on the command line; a file path or a mapping from Python."""

    def check(self, value: Any, target: str) -> Any:
        if isinstance(value, Mapping):
            return copy.deepcopy(dict(value))
        return super().check(value, target)


def _unknown(keys: Any, known: tuple[str, ...], where: str) -> None:
    import difflib

    for key in keys:
        if key not in known:
            close = difflib.get_close_matches(str(key), known, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            what = "a container's" if where else "a pod spec"
            raise CompileError(f"pod template: {where}{key} is not {what} field{hint}")


def load(value: Any) -> dict[str, Any] | None:
    """The template (``{"metadata": ..., "spec": ...}``) from a file path or a mapping, checked."""
    if value is None:
        return None
    if isinstance(value, str):
        import yaml

        path = Path(value).expanduser()
        try:
            value = yaml.safe_load(path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise CompileError(f"--pod-template {value}: {exc.strerror or exc}") from None
        except yaml.YAMLError as exc:
            raise CompileError(f"--pod-template {value}: not YAML ({str(exc).splitlines()[0]})") from None
    if not isinstance(value, Mapping):
        raise CompileError("pod template: expected a mapping (a pod spec, or metadata: and spec:)")
    template = dict(value)
    if "spec" in template and set(template) <= {"metadata", "spec"}:
        meta, pod = dict(template.get("metadata") or {}), template["spec"]
    else:
        meta, pod = {}, template
    if not isinstance(pod, Mapping) or not isinstance(meta, Mapping):
        raise CompileError("pod template: spec: and metadata: must be mappings")
    for key in meta:
        if key not in METADATA:
            raise CompileError(f"pod template: metadata.{key} cannot be set per pod (only labels and annotations)")
    _unknown(pod, POD_FIELDS, "")
    for key, why in OWNED_POD.items():
        if key in pod:
            raise CompileError(f"pod template: {key} is distcomp's to set: {why}")
    for i, c in enumerate(pod.get("containers") or []):
        if not isinstance(c, Mapping):
            raise CompileError(f"pod template: containers[{i}] must be a mapping")
        _unknown(c, CONTAINER_FIELDS, f"containers[{i}].")
    return {"metadata": dict(meta), "spec": dict(pod)}


def _merge(into: dict[str, Any], more: Mapping[str, Any]) -> None:
    for key, value in more.items():
        have = into.get(key)
        if key == "env" and isinstance(have, list) and isinstance(value, list):
            names = {e.get("name") for e in value if isinstance(e, Mapping)}
            into[key] = [e for e in have if e.get("name") not in names] + copy.deepcopy(value)
        elif isinstance(have, dict) and isinstance(value, Mapping):
            _merge(have, value)
        elif isinstance(have, list) and isinstance(value, list):
            have.extend(copy.deepcopy(value))
        else:
            into[key] = copy.deepcopy(value)


def merge_pod(pod: dict[str, Any], template: Mapping[str, Any]) -> None:
    """Merge ``template``'s pod spec into ``pod`` (a replica's ``template.spec``), in place."""
    more = dict(template["spec"])
    containers = more.pop("containers", None) or []
    _merge(pod, more)
    main = pod["containers"][0]  # the builders put the training container first
    for c in containers:
        own = [c2 for c2 in pod["containers"] if c2.get("name") == c.get("name")]
        if "name" not in c or own:
            for key, why in OWNED_CONTAINER.items():
                if key in c:
                    raise CompileError(f"pod template: containers[].{key} of the training container is distcomp's "
                                       f"to set: {why}")
            _merge(own[0] if own else main, {k: v for k, v in c.items() if k != "name"})
        else:  # a sidecar of the user's own
            pod["containers"].append(copy.deepcopy(dict(c)))


def merge_metadata(replica_template: dict[str, Any], template: Mapping[str, Any]) -> None:
    if template["metadata"]:
        _merge(replica_template.setdefault("metadata", {}), template["metadata"])


def merge_trainjob(job: dict[str, Any], template: Mapping[str, Any]) -> None:
    """A TrainJob's pods: env into the trainer, the rest into distcomp's runtime patch."""
    from ._trainjob import node_container, node_patch

    if template["metadata"]:
        raise CompileError("pod template: a TrainJob's runtimePatches cannot set pod labels or annotations "
                           "(put them in the runtime)")
    more = dict(template["spec"])
    for key in more:
        if key not in TRAINJOB_POD:
            raise CompileError(f"pod template: a TrainJob's runtimePatches cannot carry {key} (they take "
                               f"{', '.join(TRAINJOB_POD)}); set it in the runtime, or compile without --trainer-v2")
    containers = more.pop("containers", None) or []
    pod = node_patch(job)
    for c in containers:
        if c.get("name", "node") != "node":
            raise CompileError(f"pod template: a TrainJob's runtimePatches patch the runtime's containers only "
                               f"(the trainer's is 'node'), not add {c.get('name')!r}")
        for key in c:
            if key not in TRAINJOB_CONTAINER:
                raise CompileError(f"pod template: a TrainJob's runtimePatches cannot carry containers[].{key} "
                                   f"(they take {', '.join(TRAINJOB_CONTAINER)})")
        rest = {k: v for k, v in c.items() if k not in ("name", "env")}
        if "env" in c:
            _merge(job["trainer"], {"env": c["env"]})
        if rest:
            _merge(node_container(pod), rest)
    _merge(pod, more)
