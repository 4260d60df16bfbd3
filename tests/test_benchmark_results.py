"""The benchmarks' JSON results (benchmarks/_report.py writes them) and the docs' plot drawn from
them at build time (docs/hooks/benchmarks.py): what a script printed is what its file holds,
and the page's SVG follows the file."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import types
from pathlib import Path

import pytest

from tests.conftest import REPO

MKDOCS = str(Path(sys.executable).with_name("mkdocs"))


def _module(name: str, path: Path) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


report = _module("_report", REPO / "benchmarks" / "_report.py")
hook = _module("docs_hook_benchmarks", REPO / "docs" / "hooks" / "benchmarks.py")


def _measured() -> list:
    """A tiny real measurement through the report's own helper: a fresh `python -c pass` against
    `true`, three runs each; a row with a goal in seconds, one without a goal, one broken."""
    ours = [report.wall([sys.executable, "-c", "pass"]) for _ in range(3)]
    raw = [report.wall(["true"]) for _ in range(3)]
    return [report.Row("python start", "true", ours, raw, report.ratio_at_most(1000.0), key="start",
                       notes={"CPU s": [0.01, 0.02, 0.03]}),
            report.Row("python start, seconds", "true", ours, raw, report.seconds_at_most(0.000001)),
            report.Row("python start, no goal", "true", ours, raw, None),
            report.Row("broken one", "true", ours[:1], [], report.ratio_at_most(1.0), error="it broke\nsecond line")]


def test_the_json_holds_what_the_table_printed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = _measured()
    path = tmp_path / "out" / "launch.json"
    assert report.finish(rows, report.load(), 1.5, False, json_path=path) == 2  # a broken row: exit 2
    printed = capsys.readouterr().out
    doc = json.loads(path.read_text())
    assert doc["benchmark"] == "launch" and doc["machine"]["cores"] == os.cpu_count()
    assert len(doc["machine"]["load_before"]) == 3 and doc["machine"]["load_after"]
    assert doc["python"] == ".".join(map(str, sys.version_info[:3])) and "distcomp" in doc["packages"]
    assert doc["date"].startswith("20") and doc["seconds"] == 1.5
    assert [r["id"] for r in doc["rows"]] == ["start", "python-start-seconds", "python-start-no-goal", "broken-one"]
    for row, written in zip(rows, doc["rows"]):
        line = next(x for x in printed.splitlines() if x.startswith(row.name + " ") and row.raw_label in x)
        assert written["label"] == row.name and written["raw"] == row.raw_label
        assert written["runs"] == {"distcomp": list(row.ours_s), "raw": list(row.raw_s)}
        assert written["rounds"] == len(row.ours_s)
        if row.error:
            assert line.split()[-1] == "ERROR" and written["ratio"] is None and written["error"] == row.error
            continue
        ours, raw, ratio = (float(v) for v in line[len(row.name):].split()[1:4])
        assert (round(written["distcomp_s"], 3), round(written["raw_s"], 3), round(written["ratio"], 3)) == (ours, raw, ratio)
        if row.judge is None:
            assert written["goal"] is None and not line.rstrip().endswith(("PASS", "MISS"))
        else:
            assert written["goal"]["text"] in line
            assert line.split()[-1] == ("PASS" if written["goal"]["met"] else "MISS")
    start, seconds = doc["rows"][0], doc["rows"][1]
    assert start["goal"] == {"text": "ratio <= 1000", "met": True, "kind": "ratio", "value": 1000.0, "ratio": 1000.0}
    assert seconds["goal"]["met"] is False and seconds["goal"]["ratio"] == pytest.approx(0.000001 / seconds["raw_s"])
    assert start["notes"] == {"CPU s": {"median": 0.02, "runs": [0.01, 0.02, 0.03]}}
    assert "results written to" in printed and not list(path.parent.glob(".*"))  # no temporary file left


def test_a_session_writes_where_the_script_says(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """What slurm.py, ray.py, targets.py and function.py call (``args.finish(rows)``): the file is
    named for the script, in benchmarks/results/ unless $DISTCOMP_BENCH_RESULTS names another."""
    monkeypatch.setattr(sys, "argv", [str(REPO / "benchmarks" / "slurm.py"), "--repeat", "2"])
    monkeypatch.delenv(report.RESULTS_ENV, raising=False)
    assert report.results_path() == REPO / "benchmarks" / "results" / "slurm.json"
    monkeypatch.setenv(report.RESULTS_ENV, str(tmp_path))
    rows = [report.Row("slurm submit, 2x1 torch", "sbatch by hand", [4.0, 4.2], [4.5, 4.7], report.ratio_at_most(1.1),
                       notes={"sbatch --wait, same script": [10.0, 10.2]})]
    assert report.Session(2, False).finish(rows) == 0
    doc = json.loads((tmp_path / "slurm.json").read_text())
    assert doc["command"] == "slurm.py --repeat 2"
    (row,) = doc["rows"]
    assert (row["id"], row["distcomp_s"], row["raw_s"], row["ratio"]) == ("slurm-submit-2x1-torch", 4.1, 4.6, 4.1 / 4.6)
    assert row["goal"]["met"] and row["goal"]["ratio"] == 1.1


def test_launch_py_writes_its_rows(tmp_path: Path) -> None:
    """A real benchmark script, its quickest row: the file holds the rows it ran, named by id."""
    env = {**os.environ, report.RESULTS_ENV: str(tmp_path)}
    proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / "launch.py"), "--only", "start", "--rounds", "2",
                           "--warmup", "0"], capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = json.loads((tmp_path / "launch.json").read_text())
    (row,) = doc["rows"]
    assert row["id"] == "start" and row["raw"] == "date started directly" and row["rounds"] == 2
    assert row["goal"]["kind"] == "seconds" and row["goal"]["value"] == 0.06
    assert f"{row['ratio']:.3f}" in proc.stdout and "--only start" in doc["command"]


# -- the page -------------------------------------------------------------------------------------

def _results(folder: Path, name: str, rows: list) -> Path:
    path = folder / "benchmarks" / "results" / f"{name}.json"
    report.record(rows, "1.50 1.25 1.00", 3.0, path)
    return path


def _site(root: Path) -> Path:
    """A site of the benchmarks page alone, with the hook, reading ``root/benchmarks/results``."""
    (root / "docs").mkdir(parents=True, exist_ok=True)
    (root / "docs" / "benchmarks.md").write_text((REPO / "docs" / "benchmarks.md").read_text())
    (root / "mkdocs.yml").write_text(f"site_name: t\ndocs_dir: docs\nstrict: true\nnav: [benchmarks.md]\n"
                                     f"hooks: [{REPO / 'docs' / 'hooks' / 'benchmarks.py'}]\n"
                                     "markdown_extensions: [tables, toc]\n")
    return root


def _build(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([MKDOCS, "build", "--strict", "-f", str(root / "mkdocs.yml"), "-d", str(root / "site")],
                          capture_output=True, text=True, timeout=300, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})


def _svg(root: Path) -> str:
    page = (root / "site" / "benchmarks" / "index.html").read_text()
    return page[page.index("<svg"):page.index("</figure>")]


def _rows(ratios: dict[str, float | None]) -> list:
    return [report.Row(f"row {key}", "the raw tool", [ratio or 1.0], [1.0] if ratio else [], report.ratio_at_most(0.5),
                       key=key, error="" if ratio else "it broke") for key, ratio in ratios.items()]


def test_the_plot_has_a_bar_a_row_and_follows_the_json(tmp_path: Path) -> None:
    root = _site(tmp_path)
    folder = root / "benchmarks" / "results"
    _results(root, "launch", _rows({"torch": 0.7, "mpi": 1.25, "start": 0.004}))
    _results(root, "tracking", _rows({"logging": 0.35, "outage": None}))
    proc = _build(root)
    assert proc.returncode == 0, proc.stderr
    svg = _svg(root)
    bars = re.findall(r'<g class="bench-row" data-id="([^"]+)">.*?</g>', svg)
    assert bars == ["launch/torch", "launch/mpi", "launch/start", "tracking/logging"]  # the broken row left out
    values = dict(zip(bars, re.findall(r'<text class="bench-value"[^>]*>([^<]+)</text>', svg)))
    assert values == {"launch/torch": "0.70", "launch/mpi": "1.25", "launch/start": "0.004",
                      "tracking/logging": "0.35"}
    assert svg.count('<rect class="bench-bar"') == 4 and svg.count('class="bench-goal"') == 4
    assert ">1 = raw tool</text>" in svg
    page = (root / "site" / "benchmarks" / "index.html").read_text()
    caption = page[page.index("<figcaption>"):page.index("</figcaption>")]
    doc = json.loads((folder / "launch.json").read_text())
    assert "benchmarks/results/launch.json" in caption and "benchmarks/results/tracking.json" in caption
    assert doc["date"] in caption and f"{os.cpu_count()} cores" in caption and "load average 1.5 1.25 1 at the start" in caption
    assert "Left out, without a ratio: row outage (benchmarks/results/tracking.json: it broke)" in caption
    assert "<td>row mpi</td>" in page and "<td>1.25</td>" in page  # the table of every row

    _results(root, "launch", _rows({"torch": 0.45, "mpi": 1.25}))  # a new run: the page follows
    assert _build(root).returncode == 0
    changed = _svg(root)
    assert changed != svg and "launch/start" not in changed
    assert re.search(r'data-id="launch/torch">.*?<text class="bench-value"[^>]*>0.45</text>', changed)


@pytest.mark.parametrize("broken, says", [
    ("missing", "benchmarks/results/tracking.json: not found; run `make bench` (or benchmarks/tracking.py)"),
    ("{\"rows\": [", "benchmarks/results/tracking.json:1:11: not JSON"),
    ('{"date": "x", "command": "c", "machine": {"cores": 2, "load_before": [1]}, "rows": [{"id": "a"}]}',
     "benchmarks/results/tracking.json: row 1: 'label' is missing or not a string"),
])
def test_a_missing_or_malformed_file_stops_the_build_naming_it(tmp_path: Path, broken: str, says: str) -> None:
    root = _site(tmp_path)
    _results(root, "launch", _rows({"torch": 0.7}))
    if broken != "missing":
        (root / "benchmarks" / "results" / "tracking.json").write_text(broken)
    proc = _build(root)
    assert proc.returncode != 0
    assert says in proc.stderr and "Traceback" not in proc.stderr
    assert not (root / "site" / "benchmarks" / "index.html").exists()


def test_the_committed_results_draw() -> None:
    """The files in the repository are what the page is built from: each one reads, and the plot
    has a bar for each of launch's and tracking's rows with a ratio."""
    folder = REPO / "benchmarks" / "results"
    docs = [hook.read(folder / f"{name}.json") for name in hook.PLOTTED]
    svg = hook.plot(docs)
    assert svg.count('<rect class="bench-bar"') == sum(r["ratio"] is not None for d in docs for r in d["rows"]) > 0
    for path in folder.glob("*.json"):
        assert hook.read(path)["rows"], path
