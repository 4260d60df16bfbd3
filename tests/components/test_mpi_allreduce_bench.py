"""mpi-allreduce-bench: mpirun of 2 mpi4py ranks; per-size latency and bandwidth from rank 0 with
step = message size, results.csv and an SVG plot, every all-reduce result checked."""

from __future__ import annotations

import csv
import importlib.util
import json
import math
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from types import ModuleType

import pytest

from ._run import COMPONENTS, run_component, steps_only_once

NAME = "mpi-allreduce-bench"
SVG = "{http://www.w3.org/2000/svg}"


def bench_module() -> ModuleType:
    """The component's bench.py, imported without running it (mpi4py is imported lazily)."""
    spec = importlib.util.spec_from_file_location("allreduce_bench", COMPONENTS / NAME / "bench.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    writes, sys.dont_write_bytecode = sys.dont_write_bytecode, True  # no __pycache__ in the component folder
    try:
        spec.loader.exec_module(module)
    finally:
        sys.dont_write_bytecode = writes
    return module


def matplotlib_installed() -> bool:
    return importlib.util.find_spec("matplotlib") is not None


@pytest.mark.slow
def test_measures_every_size_and_checks_the_sums(sqlite_uri: str, tmp_path: Path) -> None:
    sizes = [2 ** k for k in range(3, 17)]  # 8 B .. 64 KiB
    run = run_component(NAME, tmp_path, sqlite_uri, min_bytes=5, max_bytes=100_000, iterations=10, warmup=2)
    results = run.output("results")
    assert sorted(p.name for p in results.iterdir()) == ["allreduce.svg", "results.csv", "results.json"]

    with (results / "results.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert [int(r["size_bytes"]) for r in rows] == sizes  # powers of two, min rounded up
    assert all(r["correct"] == "True" for r in rows), rows
    assert [int(r["count"]) for r in rows] == [s // 4 for s in sizes] and {r["dtype"] for r in rows} == {"float32"}
    for r in rows:
        latency, algbw, busbw = float(r["latency_us"]), float(r["algbw_gbps"]), float(r["busbw_gbps"])
        assert latency > 0 and math.isclose(algbw, int(r["size_bytes"]) / latency / 1e3, rel_tol=1e-9)
        assert math.isclose(busbw, algbw * 2 * (2 - 1) / 2, rel_tol=1e-9)  # nccl-tests: 2(n-1)/n
    summary = json.loads((results / "results.json").read_text())
    assert summary["all_correct"] is True and summary["world_size"] == 2
    assert all(r["wrong_elements"] == 0 for r in summary["results"])

    mlflow_run = run.mlflow_run()
    run_id = mlflow_run.info.run_id
    for key in ("latency_us", "algbw_gbps", "busbw_gbps"):
        points = run.history(run_id, key)
        assert steps_only_once(points) == sizes, key
        assert [v for _, v in points] == pytest.approx([float(r[key]) for r in rows], rel=1e-12), key
    assert run.history(run_id, "all_correct") == [(0, 1.0)]
    params = mlflow_run.data.params
    assert params["world_size"] == "2" and params["sizes"] == str(len(sizes))
    assert params["plotter"] == ("matplotlib" if matplotlib_installed() else "builtin")
    assert {"results.csv", "results.json", "allreduce.svg"} <= run.artifacts(run_id)
    assert mlflow_run.data.tags["distcomp.launcher"] == "mpi"

    root = ET.parse(results / "allreduce.svg").getroot()
    assert root.tag == f"{SVG}svg"


def test_builtin_plot_is_a_complete_svg(tmp_path: Path) -> None:
    """The plot an environment without matplotlib gets: two panels, one point per size."""
    bench = bench_module()
    rows = [{"size_bytes": 2 ** k, "latency_us": 2.0 + k * k, "algbw_gbps": 0.1 * k, "busbw_gbps": 0.1 * k}
            for k in range(3, 13)]
    path = tmp_path / "plot.svg"
    assert bench.plot(rows, path, "all-reduce <2 ranks> & co", "builtin") == "builtin"
    root = ET.parse(path).getroot()
    assert root.tag == f"{SVG}svg"
    assert len(root.findall(f"{SVG}polyline")) == 2 and len(root.findall(f"{SVG}circle")) == 2 * len(rows)
    texts = [t.text for t in root.iter(f"{SVG}text")]
    assert "all-reduce <2 ranks> & co" in texts and "8B" in texts and "message size (bytes, log scale)" in texts
    width, height = (float(v) for v in root.attrib["viewBox"].split()[2:])
    for circle in root.iter(f"{SVG}circle"):
        assert 0 <= float(circle.attrib["cx"]) <= width and 0 <= float(circle.attrib["cy"]) <= height


def test_message_sizes_are_powers_of_two_of_whole_elements() -> None:
    sizes = bench_module().message_sizes
    assert sizes(1, 64, 4) == [4, 8, 16, 32, 64]
    assert sizes(5, 100, 8) == [8, 16, 32, 64]
    assert sizes(4096, 4096, 4) == [4096]
    with pytest.raises(SystemExit, match="no power of two"):
        sizes(9, 15, 4)
