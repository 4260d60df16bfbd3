"""The placement bundles of a job: one per node, each with what that node's ranks need.

From the flags (``--cpus-per-node``, ``--gpus-per-node``, ``--memory``, ``--resources JSON``),
else the spec's ``resources`` (``cpu``, ``gpus``/``gpu_count``, ``memory``, Azure's
``instance_type``); one CPU per node when nothing says more.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any, Mapping

from ...errors import UsageError

if TYPE_CHECKING:
    from ...spec import ComponentSpec

_SIZE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([KMGT]i?)?B?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "k": 1000, "m": 1000**2, "g": 1000**3, "t": 1000**4,
          "ki": 1024, "mi": 1024**2, "gi": 1024**3, "ti": 1024**4}
_GPU_KEYS = ("gpus_per_node", "gpu_count", "gpus", "gpu")


def size_bytes(value: Any, where: str) -> int:
    """``16G``, ``512Mi``, ``1000000`` as bytes (Ray's ``memory`` resource)."""
    m = _SIZE.match(str(value))
    if not m or float(m.group(1)) <= 0:
        raise UsageError(f"{where} {str(value)!r}: expected a size such as 4G, 512Mi or a number of bytes")
    return int(float(m.group(1)) * _UNITS[(m.group(2) or "").lower()])


def custom(text: Any) -> dict[str, float]:
    """``--resources '{"name": n}'``: Ray custom resources per node."""
    if not text:
        return {}
    try:
        data = json.loads(text) if isinstance(text, str) else dict(text)
    except ValueError as exc:
        raise UsageError(f"--resources {text!r}: not JSON ({exc}); give an object, e.g. '{{\"accel\": 1}}'") from None
    if not isinstance(data, dict) or not all(isinstance(k, str) and k and isinstance(v, (int, float))
                                             and not isinstance(v, bool) and v > 0 for k, v in data.items()):
        raise UsageError(f"--resources {text!r}: give a JSON object of resource names to positive numbers, "
                         "e.g. '{\"accel\": 1}'")
    clash = sorted(set(data) & {"CPU", "GPU", "memory", "object_store_memory"})
    if clash:
        raise UsageError(f"--resources names {', '.join(clash)}: use --cpus-per-node, --gpus-per-node or --memory")
    return {k: float(v) for k, v in data.items()}


def spec_gpus(spec: "ComponentSpec") -> int | None:
    """GPUs per node the spec asks for: its resources, else the GPUs of its Azure instance type."""
    from ...spec.instances import instance_gpus

    res = spec.resources or {}
    for key in _GPU_KEYS:
        value = res.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return instance_gpus(res.get("instance_type"))


def bundle(spec: "ComponentSpec", options: Mapping[str, Any]) -> dict[str, float]:
    """One node's bundle (every node gets the same)."""
    res = spec.resources or {}
    cpus = options.get("cpus_per_node")
    if cpus is None:
        given = res.get("cpu") or res.get("cpus")
        cpus = float(given) if isinstance(given, (int, float)) and not isinstance(given, bool) else 1.0
    out: dict[str, float] = {"CPU": float(cpus)} if cpus else {}
    gpus = options.get("gpus_per_node")
    gpus = spec_gpus(spec) if gpus is None else gpus
    if gpus:
        out["GPU"] = float(gpus)
    memory = options.get("memory")
    where = "--memory"
    if not memory and (res.get("memory") or res.get("mem")):
        memory, where = res.get("memory") or res.get("mem"), "the spec's resources.memory"
    if memory:
        out["memory"] = float(size_bytes(memory, where))
    out.update(custom(options.get("resources")))
    if not out:
        raise UsageError("--cpus-per-node 0 and nothing else asked: a bundle needs some resource; give "
                         "--cpus-per-node, --gpus-per-node, --memory or --resources")
    return out
