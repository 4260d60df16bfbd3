"""The node sampler (tracking/_nodestats.py) reads what psutil reads, under MLflow's own names."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import psutil
import pytest

from distcomp.tracking._nodestats import Sampler, prefix

# MLflow's names (mlflow/system_metrics/metrics/*.py) for a machine without a GPU
NAMES = {"cpu_utilization_percentage", "system_memory_usage_megabytes", "system_memory_usage_percentage",
         "disk_usage_percentage", "disk_usage_megabytes", "disk_available_megabytes",
         "network_receive_megabytes", "network_transmit_megabytes"}


def test_a_sample_has_mlflow_s_names_and_psutil_s_values() -> None:
    sampler = Sampler(gpus=False)
    psutil.cpu_percent()
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])  # one core busy: a CPU figure to see
    try:
        time.sleep(1.0)
        ours, theirs = sampler.sample(), psutil.cpu_percent()
    finally:
        busy.kill()
        busy.wait()
    assert set(ours) == NAMES
    assert abs(ours["cpu_utilization_percentage"] - theirs) < 15, (ours, theirs)
    assert ours["cpu_utilization_percentage"] >= 100 / os.cpu_count() * 0.7  # the busy loop's core is counted
    mem, disk = psutil.virtual_memory(), psutil.disk_usage(os.sep)
    assert abs(ours["system_memory_usage_percentage"] - mem.percent) < 2
    assert abs(ours["system_memory_usage_megabytes"] - mem.used / 1e6) < 0.05 * mem.total / 1e6
    assert abs(ours["disk_usage_percentage"] - disk.percent) < 1
    assert abs(ours["disk_available_megabytes"] - disk.free / 1e6) < 500


def test_network_counts_since_the_sampler_started(tmp_path: os.PathLike[str]) -> None:
    """Bytes since start, as MLflow reports them; a fake /proc shows the difference exactly."""
    import pathlib

    proc = pathlib.Path(tmp_path)
    (proc / "net").mkdir()
    dev = ("Inter-|   Receive |  Transmit\n face |bytes packets errs drop fifo frame compressed multicast|bytes\n"
           "    lo: 999 1 0 0 0 0 0 0 999 1 0 0 0 0 0 0\n  eth0: {r} 1 0 0 0 0 0 0 {s} 1 0 0 0 0 0 0\n")
    (proc / "net" / "dev").write_text(dev.format(r=1_000_000, s=2_000_000))
    (proc / "stat").write_text("cpu  100 0 100 800 0 0 0 0 0 0\n")
    (proc / "meminfo").write_text("MemTotal: 1000 kB\nMemFree: 400 kB\nMemAvailable: 500 kB\nBuffers: 0 kB\n"
                                  "Cached: 100 kB\n")
    sampler = Sampler(proc=str(proc), gpus=False)
    (proc / "net" / "dev").write_text(dev.format(r=4_000_000, s=2_500_000))
    (proc / "stat").write_text("cpu  150 0 150 900 0 0 0 0 0 0\n")
    got = sampler.sample()
    assert got["network_receive_megabytes"] == pytest.approx(3.0)  # lo left out
    assert got["network_transmit_megabytes"] == pytest.approx(0.5)
    assert got["cpu_utilization_percentage"] == pytest.approx(50.0)  # 100 busy of 200 jiffies
    assert got["system_memory_usage_percentage"] == pytest.approx(50.0)
    assert got["system_memory_usage_megabytes"] == pytest.approx(500 * 1024 / 1e6)


def test_an_unreadable_source_is_left_out_not_fatal(tmp_path: os.PathLike[str]) -> None:
    got = Sampler(proc=str(tmp_path), gpus=False).sample()  # no /proc files at all
    assert "cpu_utilization_percentage" not in got and "network_receive_megabytes" not in got
    assert "disk_usage_percentage" in got  # statvfs still answers
    assert prefix("n1") + "cpu_utilization_percentage" == "system/n1/cpu_utilization_percentage"
