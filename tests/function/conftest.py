"""A user's project in a temporary folder, with a function component that imports a sibling
module, run as a user runs it: ``distcomp run proj/train.py:train`` or a script calling
``distcomp.run(train)``, each a real process with real ranks and a real MLflow SQLite store."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ..targets._jobs import clean_env
from ..targets.conftest import _kill_leftovers  # noqa: F401  (autouse: no rank outlives a test)

WAIT = 120
# a str value that a shell would split, unquote and run: it must reach the function exactly
NASTY = "it's \"quoted\" $(touch pwned) a  b; echo `x`"

TRAIN = '''\
"""A function component for the tests: every rank writes what it received, with its types."""

import json
import os
from typing import Literal, Optional

import distcomp
from distcomp import runtime
from helpers import scale  # a sibling module: it travels with the function


@distcomp.component(name="fn-probe", version="1.0.0", nproc_per_node=2, env={"FN_PROBE": "yes"})
def train(out: distcomp.Output, epochs: int = 3, lr: float = 0.5, amp: bool = False,
          mode: Literal["ok", "fail"] = "ok", note: str = "plain", data: Optional[distcomp.Input] = None):
    """Writes what each rank received, with the types."""
    info = runtime.rank_info()
    got = {name: [value, type(value).__name__] for name, value in
           dict(epochs=epochs, lr=lr, amp=amp, mode=mode, note=note, data=data).items()}
    got["out_type"] = type(out).__name__
    got["world"] = info.world_size
    got["env"] = os.environ.get("FN_PROBE")
    got["cwd"] = os.getcwd()
    with open(os.path.join(out, f"rank{info.rank}.json"), "w") as f:
        json.dump(got, f)
    for step in range(epochs):
        runtime.log_metric("loss", scale(lr, step), step=step)
    if mode == "fail" and info.rank == 1:
        raise RuntimeError("rank 1 fails on purpose: " + note)
    return epochs  # dropped, with a warning
'''

HELPERS = '''\
def scale(lr, step):
    return lr / (step + 1)
'''


@pytest.fixture
def project(tmp_path: Path) -> Path:
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "train.py").write_text(TRAIN, encoding="utf-8")
    (proj / "helpers.py").write_text(HELPERS, encoding="utf-8")
    (proj / ".gitignore").write_text("*.ckpt\nscratch/\n", encoding="utf-8")
    (proj / ".distcompignore").write_text("notes.txt\n", encoding="utf-8")
    (proj / "model.ckpt").write_text("big", encoding="utf-8")
    (proj / "notes.txt").write_text("local", encoding="utf-8")
    (proj / "scratch").mkdir()
    (proj / "scratch" / "tmp.py").write_text("x = 1\n", encoding="utf-8")
    return proj


def _env(cwd: Path, uri: str | None) -> dict[str, str]:
    """A user's shell, with distcomp's cache (function spec files) in the test's folder."""
    return clean_env(XDG_CACHE_HOME=str(cwd / ".cache"), **({"MLFLOW_TRACKING_URI": uri} if uri else {}))


def distcomp(cwd: Path, *args: str, uri: str | None = None, timeout: float = WAIT) -> subprocess.CompletedProcess[str]:
    env = _env(cwd, uri)
    return subprocess.run([sys.executable, "-m", "distcomp", *args], cwd=cwd, capture_output=True, text=True,
                          env=env, timeout=timeout)


def python(cwd: Path, code: str, uri: str | None = None) -> subprocess.CompletedProcess[str]:
    env = _env(cwd, uri)
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, env=env,
                          timeout=WAIT)


def ranks(out: Path, world: int = 2) -> dict[int, dict[str, Any]]:
    assert sorted(p.name for p in out.iterdir()) == [f"rank{r}.json" for r in range(world)]
    return {r: json.loads((out / f"rank{r}.json").read_text(encoding="utf-8")) for r in range(world)}


def explain(proc: subprocess.CompletedProcess[str]) -> str:
    return f"exit {proc.returncode}\n--- stdout ---\n{proc.stdout[-3000:]}\n--- stderr ---\n{proc.stderr[-3000:]}"
