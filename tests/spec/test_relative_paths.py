"""Relative port paths written in a spec resolve as the dialect's platform resolves them: an
azure-ai-ml v2 job's ``inputs: data: {path: ./data}`` (and a draft job's) from the YAML's
folder, as ``load_job`` does, so ``render``, ``compile`` and ``run`` give the same path from any
folder. A value given on the command line (``-i data=./x``) stays relative to the current folder."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from distcomp.spec import bind_inputs, load

V2_JOB = """\
$schema: https://azuremlschemas.azureedge.net/latest/commandJob.schema.json
command: python -c "import pathlib, sys; pathlib.Path(sys.argv[3], 'seen.txt').write_text(sys.argv[1] + ' ' + sys.argv[2])" ${{inputs.data}} ${{inputs.table}} ${{outputs.out}}
inputs:
  data:
    path: ./data
  table:
    type: uri_file
    path: tables/t.csv
outputs:
  out: {type: uri_folder}
distribution:
  type: pytorch
  process_count_per_instance: 1
"""
DRAFT = """\
command: python -c "print(1)" ${{inputs.data}} ${{inputs.table}}
inputs:
  data: {type: uri_folder, path: ./data}
  table: {type: uri_file, default: tables/t.csv}
distributed:
  pytorch:
    worker: {count: 1, slots_per: 1}
"""


def distcomp(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "distcomp", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=120)


def _layout(tmp_path: Path, text: str) -> tuple[Path, Path]:
    """The spec in ``tmp_path/project/job/`` with its data beside it; a sibling folder to start from."""
    job = tmp_path / "project" / "job"
    (job / "data").mkdir(parents=True)
    (job / "tables").mkdir()
    (job / "tables" / "t.csv").write_text("a,b\n")
    spec = job / "job.yml"
    spec.write_text(text)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    return spec, elsewhere


@pytest.mark.parametrize("text", [V2_JOB, DRAFT], ids=["v2-job", "draft"])
def test_defaults_resolve_from_the_yaml_folder_whatever_the_current_folder(tmp_path: Path, text: str) -> None:
    spec, elsewhere = _layout(tmp_path, text)
    job = spec.parent
    expected = f"{job / 'data'} {job / 'tables' / 't.csv'}"
    seen = set()
    for cwd in (job, job.parent, elsewhere):
        outputs = ("--output", "out=/tmp/out") if "outputs:" in text else ()
        proc = distcomp("render", str(spec), *outputs, cwd=cwd)
        assert proc.returncode == 0, proc.stderr
        assert expected in proc.stdout, (cwd, proc.stdout)
        seen.add(proc.stdout)
    assert len(seen) == 1  # the same line from every folder


def test_a_command_line_value_stays_relative_to_the_current_folder(tmp_path: Path) -> None:
    spec, elsewhere = _layout(tmp_path, V2_JOB)
    proc = distcomp("render", str(spec), "-i", "data=./mine", "--output", "out=/tmp/out", cwd=elsewhere)
    assert proc.returncode == 0, proc.stderr
    assert f"{elsewhere / 'mine'} {spec.parent / 'tables' / 't.csv'}" in proc.stdout


def test_the_api_binds_defaults_from_the_yaml_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec, elsewhere = _layout(tmp_path, V2_JOB)
    monkeypatch.chdir(elsewhere)
    values = bind_inputs(load(spec), {}, Path.cwd())
    assert values == {"data": spec.parent / "data", "table": spec.parent / "tables" / "t.csv"}


@pytest.mark.slow
def test_compile_gives_the_same_path_from_any_folder(tmp_path: Path) -> None:
    spec, elsewhere = _layout(tmp_path, V2_JOB)
    scripts = []
    for n, cwd in enumerate((spec.parent, elsewhere)):
        out = tmp_path / f"job{n}.sbatch"
        proc = distcomp("compile", str(spec), "--target", "slurm", "--out", str(out), cwd=cwd)
        assert proc.returncode == 0, proc.stderr
        scripts.append(out.read_text())
    assert scripts[0] == scripts[1]
    assert str(spec.parent / "data") in scripts[0]


@pytest.mark.slow
def test_a_local_run_from_another_folder_gets_the_yaml_folders_data(tmp_path: Path) -> None:
    spec, elsewhere = _layout(tmp_path, V2_JOB)
    out = tmp_path / "out"
    proc = distcomp("run", str(spec), "--no-tracking", "--output", f"out={out}", cwd=elsewhere)
    assert proc.returncode == 0, proc.stderr
    assert (out / "seen.txt").read_text() == f"{spec.parent / 'data'} {spec.parent / 'tables' / 't.csv'}"


@pytest.mark.slow
def test_a_pod_takes_the_default_in_its_own_copy_of_the_code(tmp_path: Path) -> None:
    """Kubeflow: the spec's folder is the code folder, shipped to /distcomp/code in the pod."""
    spec, elsewhere = _layout(tmp_path, V2_JOB)
    manifests = []
    for cwd in (spec.parent, elsewhere):
        proc = distcomp("compile", str(spec), "--target", "kubeflow", "--image", "registry.example/job:1",
                        "--scratch", "out", cwd=cwd)
        assert proc.returncode == 0, proc.stderr
        manifests.append(proc.stdout)
    assert manifests[0] == manifests[1]
    assert "/distcomp/code/data" in manifests[0] and str(tmp_path) not in manifests[0]
