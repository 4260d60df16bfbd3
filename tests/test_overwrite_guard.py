"""Nothing distcomp did not make is deleted or overwritten (issue 33): ``build-context --force``
and ``export(force=True)`` replace only a folder distcomp wrote (its ``.distcomp-made``), never
a system folder, ``$HOME``, a registry or anything in it; ``compile --out`` and ``schema --out``
write over a file only when distcomp wrote it (its mark), else with ``--force``, and never the
spec, a file of the code folder, a registry or a system folder; and the one output-path rule
of the core refuses, for Slurm and Ray alike, a bad ``--job-dir`` or ``--output`` before any
MLflow store or run exists. Real CLI processes throughout.

A system folder is only ever named after the core's rule has been asked about it in this
process: on code without the rule the test stops there, never reaching a command that would
move or write into /etc or /usr."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

FIRST_STEP = REPO / "examples" / "first-step"
FUNCTION = """import distcomp


@distcomp.component(version="1.0.0")
def train(epochs: int = 1) -> None:
    print(epochs)
"""


def cli(*args: str | Path, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    run_env = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", "RAY_ADDRESS")}
    run_env.update(env or {})
    return subprocess.run([sys.executable, "-m", "distcomp", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, env=run_env, timeout=120)


def refused(proc: subprocess.CompletedProcess[str], *needles: str) -> str:
    """Exit 2, one line on stderr saying each of ``needles``, no traceback, nothing on stdout."""
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == "" and "Traceback" not in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    for needle in needles:
        assert needle in proc.stderr, proc.stderr
    return proc.stderr.strip()


def snapshot(folder: Path) -> dict[str, tuple[int, float, bytes]]:
    """Every entry under ``folder`` (not following links): its mode, mtime and (files) content."""
    out = {}
    for p in sorted(folder.rglob("*")):
        st = p.lstat()
        out[str(p.relative_to(folder))] = (st.st_mode, st.st_mtime, p.read_bytes() if p.is_file() and
                                           not p.is_symlink() else b"")
    return out


def listing(folder: str) -> list[tuple[str, int, float]]:
    """A system folder's top level, as it stands (names, inodes, mtimes), to see that it did not move."""
    with os.scandir(folder) as entries:
        return sorted((e.name, e.inode(), e.stat(follow_symlinks=False).st_mtime) for e in entries)


@pytest.fixture
def comp(tmp_path: Path) -> Path:
    """A copy of the first-step example: its spec, its code folder."""
    shutil.copytree(FIRST_STEP, tmp_path / "comp")
    return tmp_path / "comp"


@pytest.fixture
def registry(tmp_path: Path, comp: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A registry ($DISTCOMP_REGISTRY) holding first-step@1.0.0; its root."""
    from distcomp.registry import open_registry

    root = tmp_path / "registry"
    monkeypatch.setenv("DISTCOMP_REGISTRY", str(root))
    open_registry(str(root)).publish(comp)
    return root


def test_the_core_rule_refuses_system_folders_home_registries_and_folders_it_did_not_make(
        tmp_path: Path, registry: Path, comp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from distcomp.base.files import MARKER
    from distcomp.core.owned import folder_problem

    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    for system in ("/", "/etc", "/usr", "/bin", "/lib", "/var", "/boot", "/proc", "/sys", "/dev", "/usr/share"):
        assert "system folder" in (folder_problem(Path(system), comp, force=True) or ""), system
    assert "your home folder" in (folder_problem(tmp_path / "home", comp, force=True) or "")
    assert "component registry" in (folder_problem(registry, comp, force=True) or "")
    assert "component registry" in (folder_problem(registry / "first-step" / "1.0.0", comp, force=True) or "")
    assert "is the code folder" in (folder_problem(comp, comp, force=True) or "")
    assert "holds the code folder" in (folder_problem(tmp_path, comp, force=True) or "")
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine")
    assert f"holds no {MARKER}" in (folder_problem(mine, comp, force=True) or "")
    assert folder_problem(mine, comp, force=False) is None  # not empty, no --force: the caller's own words
    assert folder_problem(tmp_path / "new", comp, force=True) is None


@pytest.mark.slow
def test_build_context_force_replaces_only_a_context_distcomp_wrote(
        tmp_path: Path, comp: Path, registry: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "keep.txt").write_text("my file")
    # a folder of the user's: refused, untouched
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine")
    before = snapshot(mine)
    refused(cli("build-context", comp, mine, "--no-distcomp", "--force", cwd=tmp_path),
            f"{mine} was not written by distcomp (it holds no .distcomp-made)", "--force replaces only")
    assert snapshot(mine) == before
    # the registry, a stored version in it, a new folder in it: refused, the registry untouched
    stored = snapshot(registry)
    for dest in (registry, registry / "first-step" / "1.0.0", registry / "ctx"):
        refused(cli("build-context", comp, dest, "--no-distcomp", "--force", cwd=tmp_path),
                f"{dest} is inside the component registry at {registry}")
    assert snapshot(registry) == stored
    # $HOME itself
    refused(cli("build-context", comp, home, "--no-distcomp", "--force", cwd=tmp_path, env={"HOME": str(home)}),
            f"{home} is your home folder")
    assert (home / "keep.txt").read_text() == "my file" and sorted(p.name for p in home.iterdir()) == ["keep.txt"]
    # a system folder: asked of the rule first (code without it stops here, before the command)
    from distcomp.core.owned import folder_problem

    assert "system folder" in (folder_problem(Path("/etc"), comp, force=True) or "")
    etc = listing("/etc")
    refused(cli("build-context", comp, "/etc", "--no-distcomp", "--force", cwd=tmp_path),
            "/etc is a system folder")
    assert listing("/etc") == etc
    # a context distcomp wrote is replaced, with what the user added to it
    ctx = tmp_path / "ctx"
    assert cli("build-context", comp, ctx, "--no-distcomp", cwd=tmp_path).returncode == 0
    assert (ctx / ".distcomp-made").is_file()
    (ctx / "stale.txt").write_text("old")
    again = cli("build-context", comp, ctx, "--no-distcomp", "--force", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert not (ctx / "stale.txt").exists() and (ctx / "Dockerfile").is_file()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []  # no .tmp, no .old


def _export(project: Path, dest: Path, force: bool, env: dict[str, str] | None = None) -> str:
    """``distcomp.export(train, dest, force=force)`` in a fresh process: "ok", or the refusal."""
    code = f"""
import sys
sys.path.insert(0, {str(project)!r})
import distcomp
from distcomp.errors import UsageError
from train import train
try:
    distcomp.export(train, {str(dest)!r}, force={force!r})
    print("ok")
except UsageError as exc:
    print(exc)
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=project,
                          env={**os.environ, **(env or {})}, timeout=120)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    return proc.stdout.strip()


@pytest.mark.slow
def test_export_force_replaces_only_an_export_distcomp_wrote(tmp_path: Path, registry: Path) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    (project / "train.py").write_text(FUNCTION)
    stored = snapshot(registry)
    for dest in (registry, registry / "first-step", registry / "new"):
        assert _export(project, dest, True).startswith(f"export to {dest}: it is inside the component registry at "
                                                       f"{registry}"), dest
    assert snapshot(registry) == stored  # the registry is whole: its version still resolves
    from distcomp.registry import open_registry

    assert open_registry(str(registry)).resolve("first-step@1.0.0")
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "data.csv").write_text("1,2\n")
    assert "was not written by distcomp.export (it holds no .distcomp-made)" in _export(project, mine, True)
    assert (mine / "data.csv").read_text() == "1,2\n" and len(list(mine.iterdir())) == 1
    home = tmp_path / "home"
    home.mkdir()
    assert "is your home folder" in _export(project, home, True, env={"HOME": str(home)})
    from distcomp.core.owned import folder_problem  # asked first: code without the rule stops here, before /usr

    assert "system folder" in (folder_problem(Path("/usr"), None, force=True) or "")
    usr = listing("/usr")
    assert "is a system folder" in _export(project, Path("/usr"), True)
    assert listing("/usr") == usr
    # its own export: written, marked, replaced with force
    out = tmp_path / "exported"
    assert _export(project, out, False) == "ok" and (out / ".distcomp-made").is_file()
    assert "the folder is not empty" in _export(project, out, False)
    assert _export(project, out, True) == "ok" and (out / "component.yaml").is_file()


@pytest.mark.slow
def test_compile_out_writes_only_over_what_distcomp_wrote(tmp_path: Path, comp: Path, registry: Path) -> None:
    spec = comp / "component.yaml"
    texts = {p: p.read_bytes() for p in comp.iterdir()}
    # the spec being compiled, the training script: refused, --force or not
    refused(cli("compile", "--target", "local", spec, "--out", spec, "--force", cwd=tmp_path),
            f"--out {spec} is the spec being compiled")
    refused(cli("compile", "--target", "kubeflow", spec, "--image", "x:1", "--scratch", "result", "--out",
                comp / "step.py", "--force", cwd=tmp_path), f"--out {comp / 'step.py'} is a file of the code folder")
    assert {p: p.read_bytes() for p in comp.iterdir()} == texts
    # a stored registry file
    stored = snapshot(registry)
    target = registry / "first-step" / "1.0.0" / "component.yaml"
    assert target.is_file()
    refused(cli("compile", "--target", "local", spec, "--out", target, "--force", cwd=tmp_path),
            f"is inside the component registry at {registry}")
    assert snapshot(registry) == stored
    # files under /etc and /usr: asked of the rule first (code without it stops here); nothing made there
    from distcomp.core.owned import file_problem

    for system in ("/etc/distcomp-guard-test.yaml", "/usr/distcomp-guard-test.yaml"):
        assert "system folder" in (file_problem(Path(system), None, True) or "")
        refused(cli("compile", "--target", "local", spec, "--out", system, "--force", cwd=tmp_path),
                f"--out {system} is inside the system folder")
        assert not os.path.lexists(system)
    # a file of the user's needs --force
    mine = tmp_path / "plan.yaml"
    mine.write_text("my notes\n")
    refused(cli("compile", "--target", "local", spec, "--out", mine, cwd=tmp_path),
            f"--out {mine} exists and was not written by distcomp", "--force")
    assert mine.read_text() == "my notes\n"
    assert cli("compile", "--target", "local", spec, "--out", mine, "--force", cwd=tmp_path).returncode == 0
    assert mine.read_text().startswith("# Written by distcomp (`distcomp compile --target local`)")
    # what distcomp wrote is written again without --force: YAML, a script (its mark last), JSON, a KFP component
    for target_args, name in ((["--target", "local"], "plan.yaml"), (["--target", "slurm"], "job.sbatch"),
                              (["--target", "ray", "--output", f"result={tmp_path / 'r'}"], "ray.json"),
                              (["--target", "kfp", "--image", "registry.example/distcomp:0.1.0"], "kfp.yaml")):
        out = tmp_path / name
        for _ in range(2):
            proc = cli("compile", spec, *target_args, "--out", out, cwd=tmp_path)
            assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "job.sbatch").read_text().startswith("#!/bin/bash\n")
    assert json.loads((tmp_path / "ray.json").read_text())["$comment"].startswith("Written by distcomp")
    # a compiled file inside the code folder is its own again
    inside = comp / "job.yaml"
    for _ in range(2):
        assert cli("compile", "--target", "local", spec, "--out", inside, cwd=tmp_path).returncode == 0


@pytest.mark.slow
def test_schema_out_writes_only_over_what_distcomp_wrote(tmp_path: Path, registry: Path) -> None:
    from distcomp.spec import json_schema

    out = tmp_path / "schema.json"
    for _ in range(2):
        assert cli("schema", "--out", out, cwd=tmp_path).returncode == 0
    written = json.loads(out.read_text())
    assert written.pop("$comment").startswith("Written by distcomp (`distcomp schema`)")
    assert written == json_schema("sdk")
    mine = tmp_path / "mine.json"
    mine.write_text("{}\n")
    refused(cli("schema", "--out", mine, cwd=tmp_path), f"--out {mine} exists and was not written by distcomp")
    assert mine.read_text() == "{}\n"
    assert cli("schema", "--out", mine, "--force", cwd=tmp_path).returncode == 0
    stored = snapshot(registry)
    refused(cli("schema", "--out", registry / "first-step" / "1.0.0" / "manifest.json", "--force", cwd=tmp_path),
            "is inside the component registry")
    assert snapshot(registry) == stored
    from distcomp.core.owned import file_problem  # asked first: code without the rule stops here, before /etc

    assert "system folder" in (file_problem(Path("/etc/distcomp-guard-test.json"), None, True) or "")
    refused(cli("schema", "--out", "/etc/distcomp-guard-test.json", "--force", cwd=tmp_path), "system folder /etc")
    assert not os.path.lexists("/etc/distcomp-guard-test.json")


@pytest.mark.slow
@pytest.mark.parametrize("target", ["slurm", "ray"])
def test_one_output_rule_refuses_before_any_run_exists(tmp_path: Path, comp: Path, registry: Path,
                                                       target: str) -> None:
    """The core asks the rule of every target's written paths before its check, store or run
    (no cluster here: the rule answers before the target is asked anything)."""
    store = tmp_path / "mlflow.db"
    env = {"MLFLOW_TRACKING_URI": f"sqlite:///{store}"}
    extra = ["--address", "http://127.0.0.1:9"] if target == "ray" else ["--job-dir", str(tmp_path / "jobs")]
    spec = comp / "component.yaml"
    version = registry / "first-step" / "1.0.0"
    stored = snapshot(registry)
    for output, why in ((version / "out", f"is inside the component registry at {registry}, which no job may change"),
                        (Path("/"), "is a system folder"), (Path("/etc/x"), "is inside the system folder /etc")):
        proc = cli("submit", "--target", target, spec, "--output", f"result={output}", *extra, cwd=tmp_path, env=env)
        refused(proc, f"output 'result' (AnyDirectory) at {output} {why}", "give --output result=PATH")
    assert snapshot(registry) == stored
    assert not store.exists() and not (tmp_path / "jobs").exists()
    assert not os.path.lexists("/etc/x")


def test_slurm_job_dir_is_refused_naming_job_dir_before_any_run(tmp_path: Path, comp: Path, registry: Path) -> None:
    store = tmp_path / "mlflow.db"
    env = {"MLFLOW_TRACKING_URI": f"sqlite:///{store}"}
    spec = comp / "component.yaml"
    for job_dir, why in (("/proc/1/x", "is inside the system folder /proc; give --job-dir a folder of its own"),
                         (str(registry / "jobs"), f"is inside the component registry at {registry}")):
        proc = cli("submit", "--target", "slurm", spec, "--job-dir", job_dir, cwd=tmp_path, env=env)
        line = refused(proc, f"job dir {job_dir} {why}")
        assert "--run-dir" not in line
    assert not store.exists() and not (registry / "jobs").exists()
