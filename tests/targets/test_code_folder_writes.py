"""What a local job writes into its code folder (``tb/``, ``lightning_logs/``) would ship with the
next publish or compile: ranks still start in the code folder, as torchrun starts them, and the
end of the run names the new files with the fix. What packaging leaves out (``.distcompignore``,
``.gitignore``, tool folders) and what distcomp writes itself (run folder, outputs, the MLflow
store) is not named. Real local runs, tracking into a real SQLite store."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

SPEC = """\
name: writer
type: DistributedComponent
outputs:
  model: {type: path}
launcher:
  type: torch.distributed
  process_count_per_node: 1
  additional_arguments: python write.py {outputs.model}
"""
# the rank writes by relative paths, into its working folder; its output where it is told
WRITE = """\
import os, pathlib, sys
assert pathlib.Path.cwd() == pathlib.Path(__file__).resolve().parent  # started in the code folder
pathlib.Path("tb").mkdir(exist_ok=True)
pathlib.Path("tb", "events.txt").write_text("step 1\\n")
for n in range(6):
    pathlib.Path("lightning_logs", f"version_{n}").mkdir(parents=True, exist_ok=True)
    pathlib.Path("lightning_logs", f"version_{n}", "hparams.yaml").write_text("{}\\n")
pathlib.Path("__pycache__").mkdir(exist_ok=True)
pathlib.Path("__pycache__", "x.pyc").write_bytes(b"")
pathlib.Path(sys.argv[1], "model.txt").write_text("weights\\n")
"""


def project(tmp_path: Path) -> Path:
    code = tmp_path / "project"
    code.mkdir()
    (code / "component.yaml").write_text(SPEC)
    (code / "write.py").write_text(WRITE)
    return code


def run(code: Path, cwd: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "MLFLOW_TRACKING_URI": f"sqlite:///{cwd / 'mlflow.db'}"}
    return subprocess.run([sys.executable, "-m", "distcomp", "run", str(code), *flags], capture_output=True,
                          text=True, cwd=cwd, env=env, timeout=300)


def notes(proc: subprocess.CompletedProcess[str]) -> list[str]:
    return [line for line in proc.stderr.splitlines() if "code folder" in line]


@pytest.mark.slow
def test_the_end_of_a_run_names_the_new_files_in_the_code_folder(tmp_path: Path) -> None:
    code = project(tmp_path)
    proc = run(code, code)  # from the code folder: runs/, mlflow.db, mlruns/ and the output are distcomp's
    assert proc.returncode == 0, proc.stderr
    assert (code / "tb" / "events.txt").read_text() == "step 1\n"  # written where torchrun would have it
    assert notes(proc) == [
        "distcomp run: warning: the job wrote 7 new file(s) into its code folder ., which the next publish or "
        "compile would ship: lightning_logs/version_0/hparams.yaml, lightning_logs/version_1/hparams.yaml, "
        "lightning_logs/version_2/hparams.yaml, lightning_logs/version_3/hparams.yaml, "
        "lightning_logs/version_4/hparams.yaml and 2 more; write them under an output (pass the command an "
        "output's path), or add them to ./.distcompignore (lightning_logs/ tb/)"]
    # the next run of the same job adds nothing new: nothing to say
    assert notes(run(code, code)) == []


@pytest.mark.slow
def test_what_packaging_leaves_out_is_not_named(tmp_path: Path) -> None:
    code = project(tmp_path)
    (code / ".distcompignore").write_text("lightning_logs/\n")
    (code / ".gitignore").write_text("tb/\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    proc = run(code, elsewhere, "--output", f"model={code / 'model'}")  # an output inside the code folder
    assert proc.returncode == 0, proc.stderr
    assert (code / "model" / "model.txt").is_file() and (code / "tb" / "events.txt").is_file()
    assert notes(proc) == [], proc.stderr
