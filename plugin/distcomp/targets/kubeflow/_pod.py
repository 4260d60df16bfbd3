"""The pieces every Kubeflow job manifest shares: metadata, a container, a replica spec.

Kubernetes expands ``$(NAME)`` in a container's command from its env (the operators inject
the rank variables there) and turns ``$$`` into ``$``, so every ``$`` in the user's argv is
doubled: the program gets its words exactly as rendered.
"""

from __future__ import annotations

import copy
import re
from typing import Any, Mapping, Sequence

from ...records import JobOptions

MANAGED_BY = {"app.kubernetes.io/managed-by": "distcomp"}
_LABEL_VALUE = re.compile(r"[^A-Za-z0-9._-]+")


def label_value(text: str) -> str:
    """A valid label value: at most 63 of ``[A-Za-z0-9._-]``, alphanumeric at both ends."""
    return _LABEL_VALUE.sub("-", text)[:63].strip("-._")


def metadata(options: JobOptions, component: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": options.name,
                            "labels": {**MANAGED_BY, "distcomp.dev/component": label_value(component)}}
    if options.namespace:
        meta["namespace"] = options.namespace
    return meta


def escape(argv: Sequence[str]) -> list[str]:
    """The user's words, safe from Kubernetes' ``$(VAR)`` expansion."""
    return [word.replace("$", "$$") for word in argv]


def env_list(env: Mapping[str, str]) -> list[dict[str, str]]:
    return [{"name": k, "value": v} for k, v in env.items()]


def container(name: str, options: JobOptions, command: Sequence[str], env: Mapping[str, str],
              ports: Sequence[tuple[str, int]] = ()) -> dict[str, Any]:
    c: dict[str, Any] = {"name": name, "image": options.image, "command": list(command)}
    if env:
        c["env"] = env_list(env)
    if options.workdir:
        c["workingDir"] = options.workdir
    if ports:
        c["ports"] = [{"name": n, "containerPort": p} for n, p in ports]
    if options.resources:
        c["resources"] = dict(options.resources)
    if options.volumes:
        c["volumeMounts"] = volume_mounts(options)
    return c


def _volume_name(index: int) -> str:
    return f"distcomp-pvc-{index}"  # a claim name may hold dots, which a volume name may not


def volumes(options: JobOptions) -> list[dict[str, Any]]:
    """The pod's volumes: each claim of ``options.volumes``, mounted by ``volume_mounts``."""
    return [{"name": _volume_name(i), "persistentVolumeClaim": {"claimName": claim}}
            for i, claim in enumerate(options.volumes)]


def volume_mounts(options: JobOptions) -> list[dict[str, str]]:
    return [{"name": _volume_name(i), "mountPath": path} for i, path in enumerate(options.volumes.values())]


# when the job ends (a rank failed), pods still running are deleted: nothing outlives the job,
# as locally; finished pods stay for their logs
RUN_POLICY = {"cleanPodPolicy": "Running"}


def replica(count: int, c: Mapping[str, Any], restart_policy: str = "Never",
            options: JobOptions | None = None) -> dict[str, Any]:
    """A replica spec; ``Never``: a failed rank fails the job, as locally (no silent reruns).
    ``options``: the pod gets its volumes (the container mounts them: ``container``)."""
    # a copy per replica: shared dicts would come out of YAML as &anchors and *aliases
    pod: dict[str, Any] = {"containers": [copy.deepcopy(dict(c))]}
    if options is not None and options.volumes:
        pod["volumes"] = volumes(options)
    return {"replicas": count, "restartPolicy": restart_policy, "template": {"spec": pod}}
