"""``distcomp compile --target mlflow SPEC --out DIR``: the MLproject (read back by MLflow's own
loader), the files it carries, and what it refuses."""

from __future__ import annotations

import json
import shlex
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from mlflow.projects._project_spec import load_project

from distcomp.core.jobrecord import KEY, VERSION, bind_params, read_record

from ._helpers import PROBE, distcomp, explain

SPEC = """\
name: typed-job
version: 1.0.0
type: DistributedComponent
inputs:
  name: {type: String}
  epochs: {type: Integer, default: 3}
  lr: {type: Float, default: 0.05}
  scale: {type: Float, optional: true}
  amp: {type: Boolean, default: true}
  mode: {type: Enum, enum: [fast, slow], default: fast}
  data: {type: AnyDirectory}
  init_from: {type: AnyDirectory, optional: true}
outputs:
  model: {type: AnyDirectory}
launcher:
  type: pytorch
  process_count_per_node: 2
  additional_arguments: >-
    python train.py --name {inputs.name} --epochs {inputs.epochs} --lr {inputs.lr} [--scale {inputs.scale}]
    --amp {inputs.amp} --mode {inputs.mode} --data {inputs.data} [--init-from {inputs.init_from}]
    --model {outputs.model}
"""
V2_SPEC = """\
type: command
name: v2_ports
inputs:
  vocab: {type: uri_file, default: vocab.txt}
  table: {type: uri_file, default: /etc/hostname}
  remote: {type: uri_folder, default: "https://example.com/data"}
command: python train.py --vocab ${{inputs.vocab}} --table ${{inputs.table}} --remote ${{inputs.remote}}
distribution: {type: pytorch, process_count_per_instance: 2}
"""


def write_job(folder: Path, spec: str = SPEC, code: str | None = None) -> Path:
    """A spec in ``folder`` with code beside it and the litter a folder collects."""
    folder.mkdir(parents=True, exist_ok=True)
    text = spec if code is None else spec + f"code: {code}\n"
    (folder / "component.yaml").write_text(text)
    src = folder / (code or ".")
    (src / "pkg").mkdir(parents=True, exist_ok=True)
    (src / "train.py").write_text("print('train')\n")
    (src / "pkg" / "util.py").write_text("X = 1\n")
    (src / "vocab.txt").write_text("a\nb\n")
    for litter in (".git", ".venv/bin", "__pycache__", "pkg/__pycache__", "runs/old-run", "mlruns/0"):
        (src / litter).mkdir(parents=True, exist_ok=True)
        (src / litter / "junk").write_text("junk")
    (src / "mlflow.db").write_text("not a database")
    return folder / "component.yaml"


def files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}


def test_compile_writes_the_mlproject_the_spec_and_its_code(tmp_path: Path) -> None:
    spec = write_job(tmp_path / "job")
    proc = distcomp("compile", "--target", "mlflow", str(spec), "--out", str(tmp_path / "out"), cwd=tmp_path)
    assert proc.returncode == 0, explain(proc)
    out = tmp_path / "out"
    assert files(out) == {"MLproject", "distcomp-job.json", "component.yaml", "train.py", "pkg/util.py",
                          "vocab.txt"}
    assert (out / "component.yaml").read_bytes() == spec.read_bytes()
    text = (out / "MLproject").read_text()
    assert text.startswith("# Written by `distcomp compile --target mlflow` from component.yaml (typed-job@1.0.0), "
                           "with its job record distcomp-job.json")
    data = yaml.safe_load(text)
    assert data["name"] == "typed-job" and list(data["entry_points"]) == ["main"]
    main = data["entry_points"]["main"]
    assert main["parameters"] == {
        "name": {"type": "string"},
        "epochs": {"type": "string", "default": "3"},
        "lr": {"type": "float", "default": "0.05"},
        "scale": {"type": "float", "default": ""},  # optional, no default: "" means unset
        "amp": {"type": "string", "default": "True"},
        "mode": {"type": "string", "default": "fast"},
        "data": {"type": "path"},  # MLflow makes it absolute (or downloads a URI)
        "init_from": {"type": "string", "default": ""},  # MLflow would refuse "" as a path
    }
    assert main["command"] == (  # the worker on the project's job record: no distcomp CLI flag
        "python -m distcomp.worker distcomp-job.json name={name} epochs={epochs} lr={lr} scale={scale} amp={amp} "
        "mode={mode} data={data} init_from={init_from}")
    record = read_record(out / "distcomp-job.json")  # versioned, and readable as the project's other files
    assert json.loads((out / "distcomp-job.json").read_text())[KEY] == VERSION
    assert stat.S_IMODE((out / "distcomp-job.json").stat().st_mode) == 0o644
    assert (record.action, record.spec, dict(record.options)) == ("run", str(out / "component.yaml"), {})
    assert dict(record.params) == {"name": "value", "epochs": "value", "lr": "value", "scale": "if-set",
                                   "amp": "value", "mode": "value", "data": "value", "init_from": "if-set"}
    # MLflow's own loader reads it, and fills the command as `mlflow run` would; the worker's record then
    entry = load_project(str(out)).get_entry_point("main")
    filled = entry.compute_command({"name": "a b", "data": str(tmp_path)}, storage_dir=None)
    words = shlex.split(filled)
    assert words == ["python", "-m", "distcomp.worker", "distcomp-job.json", "name=a b", "epochs=3", "lr=0.05",
                     "scale=", "amp=True", "mode=fast", f"data={tmp_path}", "init_from="]
    assert dict(bind_params(record, words[4:]).inputs) == {"name": "a b", "epochs": "3", "lr": "0.05",
                                                           "amp": "True", "mode": "fast", "data": str(tmp_path)}


def test_port_defaults_stay_paths_only_where_mlflow_can_resolve_them(tmp_path: Path) -> None:
    spec = write_job(tmp_path / "job", spec=V2_SPEC)
    proc = distcomp("compile", "--target", "mlflow", str(spec), "--out", "out", cwd=tmp_path)
    assert proc.returncode == 0, explain(proc)
    main = yaml.safe_load((tmp_path / "out" / "MLproject").read_text())["entry_points"]["main"]
    assert main["parameters"] == {
        "vocab": {"type": "string", "default": "vocab.txt"},  # relative: distcomp finds it in the project
        "table": {"type": "path", "default": "/etc/hostname"},
        "remote": {"type": "path", "default": "https://example.com/data"},  # MLflow downloads it
    }


def test_nodes_and_processes_are_baked_in_when_given(tmp_path: Path) -> None:
    proc = distcomp("compile", "--target", "mlflow", str(PROBE), "--nodes", "2", "--nproc-per-node", "3",
                    "--out", "out", cwd=tmp_path)
    assert proc.returncode == 0, explain(proc)
    command = yaml.safe_load((tmp_path / "out" / "MLproject").read_text())["entry_points"]["main"]["command"]
    assert command.startswith("python -m distcomp.worker distcomp-job.json steps={steps} ")
    assert dict(read_record(tmp_path / "out" / "distcomp-job.json").options) == {"nodes": 2, "nproc_per_node": 3}


def test_a_code_subfolder_keeps_its_place_and_code_outside_moves_in(tmp_path: Path) -> None:
    spec = write_job(tmp_path / "job", code="src")
    proc = distcomp("compile", "--target", "mlflow", str(spec), "--out", "out", cwd=tmp_path)
    assert proc.returncode == 0, explain(proc)
    assert files(tmp_path / "out") == {"MLproject", "distcomp-job.json", "component.yaml", "src/train.py",
                                       "src/pkg/util.py", "src/vocab.txt"}
    # a DistributedComponent spec whose code lies outside its folder: the project carries it as code/
    outside = write_job(tmp_path / "other", code="../shared")
    proc = distcomp("compile", "--target", "mlflow", str(outside), "--out", "out2", cwd=tmp_path)
    assert proc.returncode == 0, explain(proc)
    assert files(tmp_path / "out2") == {"MLproject", "distcomp-job.json", "component.yaml", "code/train.py",
                                        "code/pkg/util.py", "code/vocab.txt"}
    moved = yaml.safe_load((tmp_path / "out2" / "component.yaml").read_text())
    assert moved["code"] == "code" and moved["launcher"] == yaml.safe_load(SPEC)["launcher"]
    assert load_project(str(tmp_path / "out2")).name == "typed-job"
    # another dialect's layout is not rewritten: refused with the hint, nothing written
    v2 = tmp_path / "v2" / "component.yaml"
    v2.parent.mkdir()
    v2.write_text(V2_SPEC + "code: ../shared\n")
    proc = distcomp("compile", "--target", "mlflow", str(v2), "--out", "out4", cwd=tmp_path)
    assert proc.returncode == 2, explain(proc)
    assert "is outside the spec's folder" in proc.stderr and "hint:" in proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "out4").exists()
    missing = tmp_path / "nocode" / "component.yaml"
    missing.parent.mkdir()
    missing.write_text(SPEC + "code: src\n")
    proc = distcomp("compile", "--target", "mlflow", str(missing), "--out", "out3", cwd=tmp_path)
    assert proc.returncode == 2 and "does not exist" in proc.stderr and not (tmp_path / "out3").exists()


def test_a_project_inside_the_spec_folder_does_not_copy_itself(tmp_path: Path) -> None:
    spec = write_job(tmp_path / "job")
    for _ in range(2):  # the second time, the first project lies in the code folder
        proc = distcomp("compile", "--target", "mlflow", str(spec), "--out", str(tmp_path / "job" / "mlproject"),
                        cwd=tmp_path)
        assert proc.returncode == 0, explain(proc)
    assert files(tmp_path / "job" / "mlproject") == {"MLproject", "distcomp-job.json", "component.yaml", "train.py",
                                                     "pkg/util.py", "vocab.txt"}
    assert not [p.name for p in (tmp_path / "job").iterdir() if p.name.startswith(".mlproject")]


def test_it_replaces_its_own_project_but_never_a_foreign_folder(tmp_path: Path) -> None:
    spec = write_job(tmp_path / "job")
    out = tmp_path / "out"
    assert distcomp("compile", "--target", "mlflow", str(spec), "--out", str(out), cwd=tmp_path).returncode == 0
    (out / "stale.txt").write_text("from before")
    proc = distcomp("compile", "--target", "mlflow", str(spec), "--out", str(out), cwd=tmp_path)
    assert proc.returncode == 0, explain(proc)
    assert not (out / "stale.txt").exists() and (out / "MLproject").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["job", "out"]  # no temporary folder left

    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("keep me")
    (foreign / "MLproject").write_text("name: mine\nentry_points:\n  main:\n    command: python x.py\n")
    proc = distcomp("compile", "--target", "mlflow", str(spec), "--out", str(foreign), cwd=tmp_path)
    assert proc.returncode == 2, explain(proc)
    assert "is not empty and is not an MLflow project distcomp wrote" in proc.stderr
    assert sorted(p.name for p in foreign.iterdir()) == ["MLproject", "notes.txt"]
    assert (foreign / "MLproject").read_text().startswith("name: mine")
    (tmp_path / "afile").write_text("x")
    proc = distcomp("compile", "--target", "mlflow", str(spec), "--out", str(tmp_path / "afile"), cwd=tmp_path)
    assert proc.returncode == 2 and "is not a folder" in proc.stderr


@pytest.mark.parametrize("flags, message", [
    ([], "give --out DIR"),
    (["--out", "out", "--input", "steps=2"], "--input does not apply to --target mlflow"),
    (["--out", "out", "--image", "img:1"], "--image does not apply to --target mlflow"),
    (["--out", "out", "--trainer-v2"], "--trainer-v2 does not apply to --target mlflow"),
])
def test_flags_that_do_not_apply_are_usage_errors(tmp_path: Path, flags: list[str], message: str) -> None:
    proc = distcomp("compile", "--target", "mlflow", str(PROBE), *flags, cwd=tmp_path)
    assert proc.returncode == 2 and message in proc.stderr, explain(proc)
    assert "Traceback" not in proc.stderr and not (tmp_path / "out").exists()


def test_a_bad_spec_exits_2_without_traceback_or_output(tmp_path: Path) -> None:
    bad = tmp_path / "bad" / "component.yaml"
    bad.parent.mkdir()
    bad.write_text(SPEC.replace("type: pytorch", "type: pytorc"))
    proc = distcomp("compile", "--target", "mlflow", str(bad), "--out", "out", cwd=tmp_path)
    assert proc.returncode == 2, explain(proc)
    assert "unknown launcher 'pytorc'" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "out").exists() and sorted(p.name for p in tmp_path.iterdir()) == ["bad"]


def test_compiling_imports_no_mlflow(tmp_path: Path) -> None:
    code = ("import sys; from distcomp.cli import main; "
            f"rc = main(['compile', '--target', 'mlflow', {str(PROBE)!r}, '--out', {str(tmp_path / 'out')!r}]); "
            "print(rc, 'mlflow' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.stdout.split() == ["0", "False"], proc.stderr
