"""What a spec's machine size says about its nodes, for every target that asks for resources.

A spec written for Azure ML names its nodes by VM size (``resources.instance_type``); Kubeflow
asks for that many GPUs per pod, Ray for that many per placement bundle. Seed 003's MPI
workers get that many slots (one rank per GPU) unless the spec says its own count.
"""

from __future__ import annotations

from typing import Any, Mapping

__all__ = ["AZURE_GPUS", "gpu_slots", "instance_gpus", "role_gpus"]

# Azure VM sizes and the NVIDIA GPUs each has (learn.microsoft.com, "GPU-optimized VM sizes")
AZURE_GPUS = {
    "standard_nc6": 1, "standard_nc12": 2, "standard_nc24": 4, "standard_nc24r": 4,
    "standard_nc6s_v2": 1, "standard_nc12s_v2": 2, "standard_nc24s_v2": 4, "standard_nc24rs_v2": 4,
    "standard_nc6s_v3": 1, "standard_nc12s_v3": 2, "standard_nc24s_v3": 4, "standard_nc24rs_v3": 4,
    "standard_nc4as_t4_v3": 1, "standard_nc8as_t4_v3": 1, "standard_nc16as_t4_v3": 1, "standard_nc64as_t4_v3": 4,
    "standard_nc24ads_a100_v4": 1, "standard_nc48ads_a100_v4": 2, "standard_nc96ads_a100_v4": 4,
    "standard_nd6s": 1, "standard_nd12s": 2, "standard_nd24s": 4, "standard_nd24rs": 4,
    "standard_nd40rs_v2": 8, "standard_nd96asr_v4": 8, "standard_nd96amsr_a100_v4": 8, "standard_nd96isr_h100_v5": 8,
    "standard_nv6": 1, "standard_nv12": 2, "standard_nv24": 4,
}
_GPU_KEYS = ("gpu", "gpus", "nvidia.com/gpu")


def instance_gpus(size: Any) -> int | None:
    """The GPUs of Azure VM size ``size`` (any case); None: not a size known here."""
    return AZURE_GPUS.get(size.lower()) if isinstance(size, str) else None


def role_gpus(resources: Mapping[str, Any]) -> int | None:
    """The GPUs a role's ``resources`` ask for (seed 003: ``limits: {gpu: 4}``; ``requests``, or a
    flat ``{gpu: 4}`` as ``resource_limits`` writes it, too); None: no whole number of them."""
    for part in (resources.get("limits"), resources.get("requests"), resources):
        if not isinstance(part, Mapping):
            continue
        for key, value in part.items():
            if str(key).lower() in _GPU_KEYS:
                text = str(value).strip()
                if not isinstance(value, bool) and text.isdigit() and int(text) > 0:
                    return int(text)
    return None


def gpu_slots(worker: Mapping[str, Any], instance_type: Any) -> tuple[int, str] | None:
    """A worker's MPI slots where the spec does not say them (seed 003: "workers have defaults"):
    one per GPU, from the worker's own ``resources`` first, else its VM size; with where they
    came from, for messages. None: neither names a GPU."""
    if (gpus := role_gpus(worker)) is not None:
        return gpus, f"the worker's resources: {gpus} GPU(s)"
    if (gpus := instance_gpus(instance_type)) is not None:
        return gpus, f"instance_type {instance_type}: {gpus} GPU(s)"
    return None
