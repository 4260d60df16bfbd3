"""A one-node KFP step's image, from `distcomp compile --target kfp`: kfp's default python:3.11
has no distcomp, which is on no public index for the step to install, so a spec that names no
image is refused without --image (exit 2, one line, nothing written); with one, a note line says
which image the step runs in, and the compiled component (KFP's own compiler output) runs it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from kfp.components import load_component_from_file

import distcomp
from distcomp.errors import UsageError
from tests.targets.kfp.conftest import ECHO

from ...conftest import REPO

DDP = REPO / "examples" / "pytorch-ddp" / "component.yaml"  # its environment names python:3.11-slim


def compile_kfp(spec: Path, *flags: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "distcomp", "compile", "--target", "kfp", str(spec), *flags],
                          capture_output=True, text=True, timeout=120, cwd=cwd)


def test_no_image_anywhere_is_refused_in_one_line(tmp_path: Path) -> None:
    out = tmp_path / "new" / "step.yaml"
    proc = compile_kfp(ECHO, "--out", str(out), cwd=tmp_path)
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr.splitlines() == [
        "distcomp compile: kfp-echo@1.0.0: the KFP step needs an image with distcomp "
        f"{distcomp.__version__} installed, and the spec's environment names none (kfp's default python:3.11 has "
        "none, and distcomp is on no public package index for the step to pip-install): give --image IMAGE with "
        "distcomp installed, or build one with `distcomp build-context`"]
    assert not (tmp_path / "new").exists()  # nothing written


def test_no_image_from_python_names_the_option_too(tmp_path: Path) -> None:
    compiled = distcomp.compile(ECHO, "kfp")
    with pytest.raises(UsageError, match="give --image IMAGE with distcomp installed"):
        compiled.write(tmp_path / "new" / "step.yaml")
    assert not (tmp_path / "new").exists()
    assert distcomp.compile(ECHO, "kfp", image="registry.example/echo:1").write(tmp_path / "step.yaml").is_file()


@pytest.mark.slow
def test_the_given_image_is_the_steps_and_the_note_says_so(tmp_path: Path) -> None:
    out = tmp_path / "step.yaml"
    proc = compile_kfp(ECHO, "--out", str(out), "--image", "registry.example/echo:1", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    notes = [line for line in proc.stderr.splitlines() if "note:" in line]
    assert notes == [f"distcomp compile: note: the step runs in registry.example/echo:1 (--image) and installs "
                     f"nothing: the image must hold distcomp {distcomp.__version__} and what the command needs"]
    container = load_component_from_file(str(out)).component_spec.implementation.container
    assert container.image == "registry.example/echo:1"


@pytest.mark.slow
def test_the_specs_own_image_is_used_and_named(tmp_path: Path) -> None:
    out = tmp_path / "step.yaml"
    proc = compile_kfp(DDP, "--out", str(out), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert ("note: the step runs in python:3.11-slim (the spec's environment image; --image picks another) and "
            f"installs nothing: the image must hold distcomp {distcomp.__version__}") in proc.stderr
    assert load_component_from_file(str(out)).component_spec.implementation.container.image == "python:3.11-slim"


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:You may be attemping:RuntimeWarning")  # kfp.local on a non-Python image
def test_the_compiled_step_runs_under_kfp_local(kfp_local: Path, tmp_path: Path) -> None:
    """What --image compiles is the step kfp.local runs (SubprocessRunner: this environment's distcomp)."""
    out = tmp_path / "step.yaml"
    proc = compile_kfp(ECHO, "--out", str(out), "--image", "registry.example/echo:1", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    task = load_component_from_file(str(out))(name="x")
    assert sorted(p.name for p in Path(task.outputs["out"].path).glob("rank*.json")) == ["rank0.json", "rank1.json"]
