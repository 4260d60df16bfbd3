"""What each replica of a Kubeflow job asks the scheduler for: GPUs, CPU, memory, shared memory.

The values come, weakest first, from the spec (Azure's ``instance_type`` where it is a known GPU
size, ``shm_size``), its roles (seed 003's draft: ``launcher: resources: limits: {cpu: 1}``,
``worker: resources: limits: {gpu: 4}``) and the compile's options (``--gpus-per-node``,
``--cpu``, ``--memory``, ``--shm-size``). The options are per node, so they reach the pods that
are nodes of the job (not an MPIJob's launcher, which only runs mpirun, nor TF parameter servers).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping

from ._errors import CompileError

if TYPE_CHECKING:
    from ...spec import ComponentSpec

GPU = "nvidia.com/gpu"
SHM_VOLUME = "distcomp-shm"
# the replica types of the built-in kinds, as the spec's roles name them
ROLE_OF = {"Master": "worker", "Worker": "worker", "Launcher": "launcher", "Chief": "chief", "PS": "parameter_server",
           "Evaluator": "evaluator"}
NOT_NODES = ("Launcher", "PS")  # pods that hold no training rank: per-node options skip them
# torch's DataLoader workers and NCCL share tensors through /dev/shm, which a container gets at 64 MiB
SHM_BY_DEFAULT = ("PyTorchJob", "TrainJob")
# Kubernetes' resource.Quantity, as the CRDs' pattern writes it
_QUANTITY = re.compile(r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)"
                       r"|(\.[0-9]+))))?$")
_DOCKER_SIZE = re.compile(r"^([0-9]+)([bkmg])?$", re.IGNORECASE)  # Azure's and docker's shm_size: 2g
_OFF = ("0", "off", "none", "false")


@dataclass(frozen=True)
class ResourceOptions:
    """The compile's per-node overrides (None: the spec's)."""

    gpus_per_node: int | None = None
    cpu: str | None = None
    memory: str | None = None
    shm_size: str | None = None  # a size, or "0"/"off": no /dev/shm volume


def quantity(value: Any, where: str) -> int | str:
    """``value`` as a Kubernetes quantity (``2Gi``, ``500m``, ``4``), or a CompileError."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise CompileError(f"{where}: {value!r} is not a Kubernetes quantity (e.g. 4, 500m, 2Gi)")
    if isinstance(value, int):
        return value
    text = str(value).strip()
    if not _QUANTITY.match(text):
        hint = " (Kubernetes writes 2 GiB as 2Gi)" if re.match(r"^[0-9.]+[kmgt]b?$", text, re.IGNORECASE) else ""
        raise CompileError(f"{where}: {value!r} is not a Kubernetes quantity (e.g. 4, 500m, 2Gi){hint}")
    return text


def shm_quantity(value: str, where: str) -> str:
    """A shared-memory size: a Kubernetes quantity, or docker's/Azure's ``2g`` (GiB)."""
    found = _DOCKER_SIZE.match(value.strip())
    if found and found.group(2):
        unit = {"b": "", "k": "Ki", "m": "Mi", "g": "Gi"}[found.group(2).lower()]
        return found.group(1) + unit
    return str(quantity(value, where))


def _role_resources(raw: Mapping[str, Any], where: str) -> dict[str, dict[str, Any]]:
    """A role's ``resources`` as Kubernetes writes them: ``gpu`` is ``nvidia.com/gpu``; a
    mapping without ``limits``/``requests`` is limits (as ``resource_limits`` is)."""
    parts = {k: v for k, v in raw.items() if k in ("limits", "requests")}
    flat = {k: v for k, v in raw.items() if k not in ("limits", "requests")}
    if flat:
        parts = {**parts, "limits": {**dict(parts.get("limits") or {}), **flat}}
    out: dict[str, dict[str, Any]] = {}
    for part, values in parts.items():
        if not isinstance(values, Mapping):
            raise CompileError(f"{where}.{part}: expected a mapping such as {{cpu: 1, memory: 2Gi, gpu: 4}}")
        for key, value in values.items():
            name = GPU if str(key).lower() in ("gpu", "gpus") else str(key)
            out.setdefault(part, {})[name] = quantity(value, f"{where}.{part}.{key}")
    return out


def _merge(base: dict[str, dict[str, Any]], more: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    out = {part: dict(values) for part, values in base.items()}
    for part, values in more.items():
        out.setdefault(part, {}).update(values)
    return out


def spec_gpus(spec: "ComponentSpec") -> int | None:
    """GPUs per node that the spec's Azure ``instance_type`` has (None: not a size known here)."""
    from ...spec.instances import instance_gpus

    return instance_gpus(spec.resources.get("instance_type"))


def replica_resources(spec: "ComponentSpec", replica_type: str, given: ResourceOptions) -> dict[str, dict[str, Any]]:
    """The ``resources`` of a ``replica_type`` pod's training container ({} when nothing is asked)."""
    out: dict[str, dict[str, Any]] = {}
    node = replica_type not in NOT_NODES
    if node and spec_gpus(spec):
        out = {"limits": {GPU: spec_gpus(spec)}}
    role_name = ROLE_OF.get(replica_type, replica_type.lower())
    role = spec.distribution.role(role_name)
    if role is None and role_name == "chief":  # a TF chief trains as a worker does
        role = spec.distribution.role("worker")
    if role is not None and role.resources:
        out = _merge(out, _role_resources(role.resources, f"distributed.{role.name}.resources"))
    if node:
        if given.gpus_per_node is not None:
            out = _merge(out, {"limits": {GPU: given.gpus_per_node}})
        for key, value in (("cpu", given.cpu), ("memory", given.memory)):
            if value is not None:  # asked and capped alike: the pod's QoS is Guaranteed, as TorchX's are
                q = quantity(value, f"--{key}")
                out = _merge(out, {"requests": {key: q}, "limits": {key: q}})
    if out.get("limits", {}).get(GPU) == 0:
        del out["limits"][GPU]
    return {part: values for part, values in out.items() if values}


def shm_size(spec: "ComponentSpec", kind: str, given: ResourceOptions) -> tuple[bool, str | None]:
    """Whether the pods get a memory-backed /dev/shm, and its size limit (None: the node's)."""
    asked = given.shm_size if given.shm_size is not None else spec.resources.get("shm_size")
    if asked is not None and str(asked).strip().lower() in _OFF:
        return False, None
    if asked is not None:
        return True, shm_quantity(str(asked), "--shm-size" if given.shm_size is not None else "resources.shm_size")
    return kind in SHM_BY_DEFAULT, None


def shm_volume(size: str | None) -> dict[str, Any]:
    empty: dict[str, Any] = {"medium": "Memory"}
    if size:
        empty["sizeLimit"] = size
    return {"name": SHM_VOLUME, "emptyDir": empty}


SHM_MOUNT = {"name": SHM_VOLUME, "mountPath": "/dev/shm"}
