"""Azure ML: a compiled component is a file anyone with the workspace reads, so a secret-named
value is never in it. A function's secret-named parameter keeps no default there (the value is
given when the job is submitted), nor does a secret-named environment variable; each is said in
a note. azure-ai-ml still loads and validates the component."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ...targets._jobs import clean_env
from .test_component import azure_load

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore:.*:UserWarning:marshmallow")

KEY = "sk-live-9c2e1b"
AUTH = "auth-3f7d2a"
TRAIN = f'''\
import distcomp


@distcomp.component(name="secret-defaults", env={{"CLOUD_AUTH": "{AUTH}", "MODE": "fast"}})
def train(epochs: int = 3, api_key: str = "{KEY}", note: str = "plain"):
    print(epochs, len(api_key), note)
'''


@pytest.mark.slow
def test_a_secret_named_default_and_variable_stay_out_of_the_component(tmp_path: Path) -> None:
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "train.py").write_text(TRAIN, encoding="utf-8")
    argv = [sys.executable, "-m", "distcomp", "compile", "proj/train.py:train", "--target", "azureml",
            "--image", "registry.example/i:1"]
    env = clean_env(XDG_CACHE_HOME=str(tmp_path / ".cache"))
    shown = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=120, env=env)
    assert shown.returncode == 0, shown.stderr
    wrote = subprocess.run([*argv, "--out", "az/component.yml"], cwd=tmp_path, capture_output=True, text=True,
                           timeout=120, env=env)
    assert wrote.returncode == 0, wrote.stderr
    text = (tmp_path / "az" / "component.yml").read_text(encoding="utf-8")
    for out in (shown.stdout, shown.stderr, wrote.stdout, wrote.stderr, text):
        assert KEY not in out and AUTH not in out
    assert "input 'api_key': its default was left out" in wrote.stderr
    assert "environment variable(s) CLOUD_AUTH: left out" in wrote.stderr
    doc = yaml.safe_load(text)
    assert "default" not in doc["inputs"]["api_key"] and doc["inputs"]["epochs"]["default"] == 3
    assert doc["inputs"]["note"]["default"] == "plain"
    assert "CLOUD_AUTH" not in doc["environment_variables"] and doc["environment_variables"]["MODE"] == "fast"
    component = azure_load(tmp_path / "az" / "component.yml")  # azure-ai-ml's own loader and validator
    assert component.inputs["api_key"].default is None
