"""``distcomp validate`` on a command that brings its own launcher (issue 34): seed 003's slip,
``python -m torch.distributed.launch ... --use_env python train.py``, where the launcher takes
``python`` as its script, gets a warning with the fix; a launcher program missing on this
machine (``horovodrun``) gets a warning, not an error, since the job may run elsewhere."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ..targets._jobs import clean_env

SPEC = """\
type: command
name: own-warnings
inputs: {{epochs: {{type: integer, default: 2}}}}
command: >-
  {command}
environment_variables: {{ACCELERATE_USE_CPU: 'true'}}
distribution: {{type: {kind}{slots}}}
"""
SEED = "python -m torch.distributed.launch --nproc_per_node 4 --use_env python train.py --epochs ${{inputs.epochs}}"


def validate(tmp_path: Path, command: str, kind: str = "pytorch") -> tuple[int, str, list[str]]:
    """Exit code, stdout and the warning lines of ``distcomp validate`` on a spec running ``command``."""
    (tmp_path / "train.py").write_text("print('hi')\n", encoding="utf-8")
    spec = tmp_path / "job.yml"
    slots = ", process_count_per_instance: 2" if kind == "mpi" else ""  # room for -np 2
    spec.write_text(SPEC.format(command=command, kind=kind, slots=slots), encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "distcomp", "validate", str(spec)], capture_output=True, text=True,
                          timeout=60, env=clean_env(PATH="/usr/bin:/bin"), cwd=tmp_path)
    assert "Traceback" not in proc.stderr, proc.stderr
    warnings = [line for line in proc.stderr.splitlines() if line.startswith(f"{spec}: warning: ")]
    assert len(warnings) == len(proc.stderr.splitlines()), proc.stderr  # nothing but warnings
    return proc.returncode, proc.stdout, warnings


def test_seed_003_python_as_the_launchers_script_is_warned_with_the_fix(tmp_path: Path) -> None:
    code, out, warnings = validate(tmp_path, SEED)
    assert code == 0 and ": ok: own-warnings" in out  # a warning: the spec itself is valid
    assert len(warnings) == 1, warnings
    assert "python -m torch.distributed.launch takes `python` as its script" in warnings[0]
    assert warnings[0].endswith("drop that `python`: python -m torch.distributed.launch --nproc_per_node 4 "
                                "--use_env train.py ...")


@pytest.mark.parametrize("command, script", [
    ("torchrun --nproc-per-node=2 --standalone python3 train.py", "python3"),
    ("cd . && deepspeed --num_gpus 2 --master_port 29501 /usr/bin/python train.py", "/usr/bin/python"),
    ("accelerate launch --multi_gpu --num_processes 2 python train.py", "python"),
])
def test_every_torch_style_launcher(tmp_path: Path, command: str, script: str) -> None:
    code, _, warnings = validate(tmp_path, command)
    assert code == 0 and len(warnings) == 1 and f"takes `{script}` as its script" in warnings[0], warnings


@pytest.mark.parametrize("command", [
    "python -m torch.distributed.launch --nproc_per_node 2 --use_env train.py --epochs ${{inputs.epochs}}",
    "torchrun --nproc_per_node 2 --no-python python train.py",  # the script is a program: python is right
    "torchrun --nproc_per_node 2 train.py --interpreter python",  # python is the script's argument
    "python train.py",  # no launcher of its own
])
def test_no_warning_where_the_script_is_right(tmp_path: Path, command: str) -> None:
    assert validate(tmp_path, command)[::2] == (0, [])


def test_mpirun_running_python_is_right(tmp_path: Path) -> None:
    if shutil.which("mpirun", path=os.path.dirname(sys.executable)) is None:
        pytest.skip("no mpirun next to this Python")
    assert validate(tmp_path, "mpirun -np 2 python train.py", kind="mpi")[::2] == (0, [])


@pytest.mark.parametrize("program", ["horovodrun", "/opt/nowhere/bin/mpirun"])
def test_a_launcher_program_missing_here_is_a_warning(tmp_path: Path, program: str) -> None:
    if shutil.which(program, path=os.path.dirname(sys.executable) + os.pathsep + "/usr/bin:/bin"):
        pytest.skip(f"{program} is installed here")
    code, out, warnings = validate(tmp_path, f"{program} -np 2 python train.py", kind="mpi")
    assert code == 0 and ": ok: own-warnings" in out
    assert len(warnings) == 1, warnings
    assert f"the command's launcher {program} is not on this machine" in warnings[0]
    assert "fine where the job runs elsewhere with it installed" in warnings[0]
    if program == "horovodrun":
        assert "pip install horovod" in warnings[0]


def test_a_launcher_next_to_this_python_is_found(tmp_path: Path) -> None:
    """A local run puts this Python's folder first on PATH: its torchrun is there, PATH or not."""
    if shutil.which("torchrun", path=os.path.dirname(sys.executable)) is None:
        pytest.skip("no torchrun next to this Python")
    assert validate(tmp_path, "torchrun --nproc_per_node 2 train.py")[::2] == (0, [])
