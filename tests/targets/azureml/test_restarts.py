"""Issue 36 on Azure ML: the target writes a command component, which Azure ML never starts
again after a failure (azure-ai-ml's schemas give ``retry_settings`` to parallel steps only), so
``max_restarts`` (the flag, or the spec's ``launcher.max_restarts``) is not placed in the file,
which azure-ai-ml's own loader and validator still accept, and the compile says so."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import distcomp

from .test_component import IMAGE, azure_load

TORCH = Path(__file__).resolve().parents[2] / "launchers" / "jobs" / "torch" / "component.yaml"
NOTE = "max_restarts 2 is not applied: this is a command component, and Azure ML does not start a failed command " \
       "job again"

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore:.*:UserWarning:marshmallow")


def test_a_command_component_says_it_is_not_restarted(tmp_path: Path) -> None:
    compiled = distcomp.compile(str(TORCH), "azureml", image=IMAGE, max_restarts=2)
    (note,) = [n for n in compiled.notes if "max_restarts" in n]
    assert note.startswith("warning: " + NOTE) and "resubmit the job" in note
    out = compiled.write(tmp_path / "c.yaml")
    component = azure_load(out)  # azure-ai-ml's loader and validator accept it as ever
    assert "retry" not in out.read_text() and component.type == "command"
    plain = distcomp.compile(str(TORCH), "azureml", image=IMAGE)
    assert not [n for n in plain.notes if "max_restarts" in n]
    assert yaml.safe_load(plain.text) == yaml.safe_load(compiled.text)  # the same component either way


def test_the_spec_and_the_cli_give_it_too(tmp_path: Path) -> None:
    spec = tmp_path / "component.yaml"
    spec.write_text(TORCH.read_text().replace("\nlauncher:\n", "\nlauncher:\n  max_restarts: 2\n"))
    (tmp_path / "rank.py").write_text("")
    assert any(NOTE in n for n in distcomp.compile(str(spec), "azureml", image=IMAGE).notes)
    assert not any("max_restarts" in n for n in distcomp.compile(str(spec), "azureml", image=IMAGE,
                                                                   max_restarts=0).notes)
    proc = subprocess.run([sys.executable, "-m", "distcomp", "compile", "--target", "azureml", str(TORCH), "--image",
                           IMAGE, "--max-restarts", "2", "--out", str(tmp_path / "out.yaml")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and NOTE in proc.stderr, proc.stderr
