"""A function component published to a real folder registry as ``name@version`` (from the CLI
as ``FILE.py:FUNCTION`` and from Python as the decorated object), then run by that name on 2
local ranks with the project deleted, from a folder holding decoys of its modules: typed values
arrive, one MLflow run, and what runs is the stored code with distcomp's own runner."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from mlflow import MlflowClient

import distcomp.function.run
from distcomp import registry

from ..targets._jobs import clean_env
from .conftest import NASTY, WAIT, explain, ranks

TRAIN = '''\
"""Every rank writes what it received, with the types, and where its code came from."""

import json
import os
import sys

import distcomp
import helpers
from distcomp import runtime


@distcomp.component(name="fn-reg", version="1.0.0", nproc_per_node=2)
def train(out: distcomp.Output, epochs: int = 3, lr: float = 0.5, amp: bool = False, note: str = "plain"):
    """Published and run by name."""
    info = runtime.rank_info()
    got = {name: [value, type(value).__name__] for name, value in
           dict(epochs=epochs, lr=lr, amp=amp, note=note).items()}
    got.update(world=info.world_size, cwd=os.getcwd(), helpers=helpers.__file__, version=helpers.VERSION,
               runner=sys.modules["__main__"].__file__, distcomp=distcomp.__file__, path=sys.path)
    with open(os.path.join(out, f"rank{info.rank}.json"), "w") as f:
        json.dump(got, f)
    for step in range(epochs):
        runtime.log_metric("loss", helpers.scale(lr, step), step=step)
'''

HELPERS = '''\
VERSION = "stored"


def scale(lr, step):
    return lr / (step + 1)
'''

DECOY = 'raise RuntimeError("a decoy in the folder the job was started from was imported")\n'


def _cli(cwd: Path, reg: Path, *args: str, uri: str | None = None) -> subprocess.CompletedProcess[str]:
    env = clean_env(DISTCOMP_REGISTRY=str(reg), **({"MLFLOW_TRACKING_URI": uri} if uri else {}))
    return subprocess.run([sys.executable, "-m", "distcomp", *args], cwd=cwd, capture_output=True, text=True,
                          env=env, timeout=WAIT)


@pytest.fixture
def proj(tmp_path: Path) -> Path:
    folder = tmp_path / "proj"
    folder.mkdir()
    (folder / "train_fn.py").write_text(TRAIN, encoding="utf-8")
    (folder / "helpers.py").write_text(HELPERS, encoding="utf-8")
    return folder


@pytest.mark.slow
def test_publish_then_run_by_name_with_the_project_gone(proj: Path, tmp_path: Path, sqlite_uri: str) -> None:
    reg = tmp_path / "registry"
    first = _cli(tmp_path, reg, "registry", "publish", "proj/train_fn.py:train")
    assert first.returncode == 0, explain(first)
    assert first.stdout.startswith("published fn-reg@1.0.0 (sha256 ")
    stored = reg / "fn-reg" / "1.0.0"
    files = sorted(p.relative_to(stored).as_posix() for p in stored.rglob("*") if p.is_file())
    assert files == ["code/helpers.py", "code/train_fn.py", "component.yaml", "manifest.json"]
    # the same content again (the CLI's form, then the decorated object from Python): a no-op
    again = _cli(tmp_path, reg, "registry", "publish", "proj/train_fn.py:train")
    assert again.returncode == 0 and "fn-reg@1.0.0 already published (same content)" in again.stdout, explain(again)
    sys.path.insert(0, str(proj))
    try:
        import train_fn

        report = registry.publish(train_fn.train, registry=str(reg))
    finally:
        sys.path.remove(str(proj))
        sys.modules.pop("train_fn", None)
        sys.modules.pop("helpers", None)
    assert report.ok and [(p.name, p.version, p.created) for p in report.published] == [("fn-reg", "1.0.0", False)]
    # other content under the same version is refused, the stored version untouched
    (proj / "helpers.py").write_text(HELPERS.replace('"stored"', '"changed"'), encoding="utf-8")
    changed = _cli(tmp_path, reg, "registry", "publish", "proj/train_fn.py:train")
    assert changed.returncode == 2 and "already published with different content" in changed.stderr, explain(changed)
    assert "Traceback" not in changed.stderr
    assert 'VERSION = "stored"' in (stored / "code" / "helpers.py").read_text(encoding="utf-8")

    shutil.rmtree(proj)  # no Python file of the user's is left anywhere
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for decoy in ("helpers.py", "train_fn.py"):
        (elsewhere / decoy).write_text(DECOY, encoding="utf-8")
    out = tmp_path / "out"
    run = _cli(elsewhere, reg, "run", "fn-reg@1.0.0", "-i", "epochs=4", "-i", "amp=true", "-i", f"note={NASTY}",
               "-o", f"out={out}", "--run-dir", str(tmp_path / "run"), "--experiment", "fn-reg", uri=sqlite_uri)
    assert run.returncode == 0, explain(run)
    got = ranks(out)
    runner = os.path.realpath(distcomp.function.run.__file__)
    for r in (0, 1):
        seen = got[r]
        assert seen["epochs"] == [4, "int"] and seen["lr"] == [0.5, "float"] and seen["amp"] == [True, "bool"]
        assert seen["note"] == [NASTY, "str"] and seen["world"] == 2
        # the stored code ran (in a working copy of it), with distcomp's own runner and package
        assert seen["version"] == "stored" and Path(seen["helpers"]).parent == Path(seen["cwd"])
        assert not Path(seen["cwd"]).is_relative_to(elsewhere) and not Path(seen["cwd"]).is_relative_to(proj)
        assert os.path.realpath(seen["runner"]) == runner
        assert os.path.realpath(seen["distcomp"]) == os.path.realpath(distcomp.__file__)
        assert not any(p and Path(p).is_relative_to(proj) for p in seen["path"])
    assert not list(tmp_path.rglob("pwned"))
    client = MlflowClient(sqlite_uri)
    exp = client.get_experiment_by_name("fn-reg")
    assert exp is not None
    runs = client.search_runs([exp.experiment_id])
    assert len(runs) == 1 and runs[0].info.status == "FINISHED"
    assert runs[0].data.params["epochs"] == "4" and runs[0].data.tags["distcomp.component"] == "fn-reg"
    history = client.get_metric_history(runs[0].info.run_id, "loss")
    assert sorted((m.step, m.value) for m in history) == [(s, 0.5 / (s + 1)) for s in range(4)]
    # the stored version still verifies: the run wrote nothing into the registry
    shown = _cli(elsewhere, reg, "registry", "show", "fn-reg@1.0.0")
    assert shown.returncode == 0 and "(3 files, verified)" in shown.stdout, explain(shown)


def test_refused_publishes_say_why_in_one_line(proj: Path, tmp_path: Path) -> None:
    reg = tmp_path / "registry"
    (proj / "unversioned.py").write_text(TRAIN.replace('version="1.0.0", ', ""), encoding="utf-8")
    (proj / "plain.py").write_text("def train():\n    pass\n", encoding="utf-8")
    for ref, message in (("proj/unversioned.py:train", "unversioned.py:train: fn-reg has no version; add one"),
                         ("proj/plain.py:train", "train is a function, not a component"),
                         ("proj/missing.py:train", "no such file")):
        proc = _cli(tmp_path, reg, "registry", "publish", ref)
        assert proc.returncode == 2, explain(proc)
        assert message in proc.stderr and "Traceback" not in proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1
    # a project holding its own `distcomp` would run in place of distcomp's runner on each rank
    (proj / "distcomp.py").write_text("", encoding="utf-8")
    shadow = _cli(tmp_path, reg, "registry", "publish", "proj/train_fn.py:train")
    assert shadow.returncode == 2 and "distcomp.py; on each rank it would be imported instead of distcomp itself" in \
        shadow.stderr, explain(shadow)
    assert not (reg / "fn-reg").exists()
