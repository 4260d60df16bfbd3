"""One node's system metrics, sampled from /proc with the standard library, under MLflow's own
names (``mlflow.system_metrics``: ``cpu_utilization_percentage``, ``system_memory_usage_megabytes``,
... ``gpu_0_utilization_percentage``), so the MLflow UI's system-metrics view shows them.

Why not MLflow's monitor itself: it needs ``import mlflow`` and psutil, seconds of CPU in a
process started on every node of every job, and a job's end waited for it. This is read in
microseconds by a process that starts in a tenth of a second; the values are psutil's (the
same formulas from the same /proc files). GPUs come from NVML when ``nvidia-ml-py`` is there,
as MLflow reads them.
"""

from __future__ import annotations

import os
import time
from typing import Any

__all__ = ["Sampler", "prefix"]

_MB = 1e6  # MLflow's megabytes are 10**6 bytes


def prefix(node: str) -> str:
    """MLflow's per-node prefix (``SystemMetricsMonitor(node_id=...)``)."""
    return f"system/{node}/"


def _cpu_times(proc: str) -> tuple[float, float]:
    """(busy, total) jiffies of all CPUs, as psutil.cpu_percent counts them (guest time is in user)."""
    with open(os.path.join(proc, "stat")) as f:
        fields = [float(x) for x in f.readline().split()[1:]]
    user, nice, system, idle, iowait, irq, softirq, steal = (fields + [0.0] * 8)[:8]
    guest, guest_nice = (fields[8:10] + [0.0, 0.0])[:2]
    idle_all = idle + iowait
    total = user - guest + nice - guest_nice + system + idle + iowait + irq + softirq + steal + guest + guest_nice
    return total - idle_all, total


def _meminfo(proc: str) -> dict[str, float]:
    out: dict[str, float] = {}
    with open(os.path.join(proc, "meminfo")) as f:
        for line in f:
            name, _, rest = line.partition(":")
            parts = rest.split()
            if parts:
                out[name] = float(parts[0]) * 1024  # kB
    return out


def _net_bytes(proc: str) -> tuple[float, float]:
    """(received, sent) bytes on every interface but loopback, since boot (psutil.net_io_counters
    counts lo too; MLflow reports the difference since it started, which lo only inflates)."""
    recv = sent = 0.0
    with open(os.path.join(proc, "net", "dev")) as f:
        for line in f.readlines()[2:]:
            name, _, rest = line.partition(":")
            parts = rest.split()
            if name.strip() != "lo" and len(parts) >= 9:
                recv += float(parts[0])
                sent += float(parts[8])
    return recv, sent


class Sampler:
    """``sample()``: this node's metrics since the last call (CPU) or since the sampler started
    (network), by MLflow's names; a source that cannot be read is left out, never fatal."""

    def __init__(self, proc: str = "/proc", disk: str = os.sep, gpus: bool = True) -> None:
        self.proc, self.disk = proc, disk
        self._cpu = self._try(lambda: _cpu_times(proc))
        self._net0 = self._try(lambda: _net_bytes(proc))
        self._nvml: Any = None
        self.gpu_problem: str | None = None
        if gpus:
            self._nvml, self.gpu_problem = _nvml()

    @staticmethod
    def _try(read: Any) -> Any:
        try:
            return read()
        except (OSError, ValueError):
            return None

    def sample(self) -> dict[str, float]:
        out: dict[str, float] = {}
        cpu = self._try(lambda: _cpu_times(self.proc))
        if cpu is not None and self._cpu is not None and cpu[1] <= self._cpu[1]:
            time.sleep(0.05)  # no clock tick since the last reading (a sample right after start): wait one
            cpu = self._try(lambda: _cpu_times(self.proc))
        if cpu is not None and self._cpu is not None and cpu[1] > self._cpu[1]:
            out["cpu_utilization_percentage"] = round(100.0 * (cpu[0] - self._cpu[0]) / (cpu[1] - self._cpu[1]), 1)
        self._cpu = cpu if cpu is not None else self._cpu
        mem = self._try(lambda: _meminfo(self.proc))
        if mem and "MemTotal" in mem:
            total = mem["MemTotal"]
            available = mem.get("MemAvailable", mem.get("MemFree", 0.0))
            cached = mem.get("Cached", 0.0) + mem.get("SReclaimable", 0.0)
            used = total - mem.get("MemFree", 0.0) - mem.get("Buffers", 0.0) - cached
            out["system_memory_usage_megabytes"] = (used if used >= 0 else total - mem.get("MemFree", 0.0)) / _MB
            out["system_memory_usage_percentage"] = round(100.0 * (total - available) / total, 1)
        try:
            st = os.statvfs(self.disk)
        except OSError:
            st = None
        if st is not None and st.f_blocks:
            used = (st.f_blocks - st.f_bfree) * st.f_frsize
            free = st.f_bavail * st.f_frsize
            out["disk_usage_percentage"] = round(100.0 * used / (used + free), 1) if used + free else 0.0
            out["disk_usage_megabytes"] = used / _MB
            out["disk_available_megabytes"] = free / _MB
        net = self._try(lambda: _net_bytes(self.proc))
        if net is not None and self._net0 is not None:
            out["network_receive_megabytes"] = (net[0] - self._net0[0]) / _MB
            out["network_transmit_megabytes"] = (net[1] - self._net0[1]) / _MB
        out.update(self._gpus())
        return out

    def _gpus(self) -> dict[str, float]:
        nvml, out = self._nvml, dict[str, float]()
        if nvml is None:
            return out
        for i in range(nvml.nvmlDeviceGetCount()):
            try:
                handle = nvml.nvmlDeviceGetHandleByIndex(i)
                memory = nvml.nvmlDeviceGetMemoryInfo(handle)
                out[f"gpu_{i}_memory_usage_percentage"] = round(memory.used / memory.total * 100, 1)
                out[f"gpu_{i}_memory_usage_megabytes"] = memory.used / _MB
                out[f"gpu_{i}_utilization_percentage"] = float(nvml.nvmlDeviceGetUtilizationRates(handle).gpu)
                watts = nvml.nvmlDeviceGetPowerUsage(handle)
                out[f"gpu_{i}_power_usage_watts"] = watts / 1000
                out[f"gpu_{i}_power_usage_percentage"] = watts / nvml.nvmlDeviceGetEnforcedPowerLimit(handle) * 100
            except Exception:  # noqa: BLE001 — one GPU's reading (NVMLError) must not stop the others
                continue
        return out


def _nvml() -> tuple[Any, str | None]:
    """NVML (``nvidia-ml-py``) initialised, or None and why not."""
    try:
        import pynvml  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        return None, "no GPU metrics: nvidia-ml-py is not installed"
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # noqa: BLE001 — NVMLError: no driver, no GPU
        return None, f"no GPU metrics: NVML: {exc}"
    return pynvml, None
