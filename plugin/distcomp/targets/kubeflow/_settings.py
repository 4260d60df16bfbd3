"""What the compile's options add to a built job manifest, whatever kind built it: each
replica's resources and shared memory.

Applied after the kind's builder, to every ``spec.*ReplicaSpecs`` entry (the training
operators' and mpi-operator's layout, which a plugin's kind shares) or, for a TrainJob, to its
``trainer`` and distcomp's own ``runtimePatches`` entry."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping

from ._resources import SHM_MOUNT, ResourceOptions, replica_resources, shm_size, shm_volume

if TYPE_CHECKING:
    from ...spec import ComponentSpec


@dataclass(frozen=True)
class JobSettings:
    """Everything the compile's options say about the pods beyond the command."""

    resources: ResourceOptions = field(default_factory=ResourceOptions)


def replica_specs(manifest: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Replica type -> replica spec ({} for a kind without ``*ReplicaSpecs``)."""
    spec = manifest.get("spec") or {}
    key = next((k for k in spec if k.endswith("ReplicaSpecs")), None)
    return spec[key] if key else {}


def _resources(target: dict[str, Any], key: str, more: dict[str, dict[str, Any]]) -> None:
    if not more:
        return
    current = target.setdefault(key, {})
    for part, values in more.items():
        current.setdefault(part, {}).update(values)


def apply(manifest: dict[str, Any], spec: "ComponentSpec", settings: JobSettings) -> dict[str, Any]:
    """``manifest`` with ``settings`` applied (changed in place, and returned)."""
    kind = manifest.get("kind", "")
    shm, size = shm_size(spec, kind, settings.resources)
    if kind == "TrainJob":
        from ._trainjob import node_container, node_patch

        _resources(manifest["spec"]["trainer"], "resourcesPerNode",
                   replica_resources(spec, "Worker", settings.resources))
        if shm:
            pod = node_patch(manifest["spec"])
            pod.setdefault("volumes", []).append(shm_volume(size))
            node_container(pod).setdefault("volumeMounts", []).append(dict(SHM_MOUNT))
        return manifest
    for replica_type, replica in replica_specs(manifest).items():
        pod = replica["template"]["spec"]
        main = pod["containers"][0]  # the builders put the training container first
        _resources(main, "resources", replica_resources(spec, replica_type, settings.resources))
        if shm and replica_type not in ("Launcher", "PS"):
            pod.setdefault("volumes", []).append(shm_volume(size))
            main.setdefault("volumeMounts", []).append(dict(SHM_MOUNT))
    return manifest


def settings_of(options: Mapping[str, Any]) -> JobSettings:
    """The JobSettings the target's options (``distcomp compile/submit --target kubeflow``) give."""
    gpus = options.get("gpus_per_node")
    return JobSettings(resources=ResourceOptions(
        gpus_per_node=int(gpus) if gpus is not None else None, cpu=_text(options.get("cpu")),
        memory=_text(options.get("memory")), shm_size=_text(options.get("shm_size"))))


def _text(value: Any) -> str | None:
    return None if value is None else str(value)
