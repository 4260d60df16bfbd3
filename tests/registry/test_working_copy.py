"""A job never writes into a stored version: its ranks run in a fresh, verified copy of the code
in the run folder, removed when the job ends; run folders and outputs inside a registry are
refused. Real `distcomp run`s, as root (which read-only modes do not stop)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from distcomp.registry import locate, open_registry
from tests.registry.conftest import mismatch, refused

# A job that does what Lightning does by default (./lightning_logs beside its code), rewrites one
# of its own code files in place, says which helper it imported, and exits with --input code.
SCRIBBLE = {
    "component.yaml": "name: scribble\nversion: 1.0.0\ntype: DistributedComponent\ninputs:\n  code:\n"
                      "    type: Integer\n    default: 0\noutputs:\n  result:\n    type: AnyDirectory\n"
                      "launcher:\n  type: torch.distributed\n"
                      "  additional_arguments: python run.py {outputs.result} {inputs.code}\ncode: .\n",
    "run.py": "import os, pathlib, sys\nimport helper\n"
              "os.makedirs('lightning_logs/version_0', exist_ok=True)\n"
              "pathlib.Path('lightning_logs/version_0/metrics.csv').write_text('loss\\n1.0\\n')\n"
              "with open('helper.py', 'w') as f:\n    f.write('X = \"rewritten\"\\n')\n"
              "pathlib.Path(sys.argv[1], 'saw.txt').write_text(helper.X)\n"
              "sys.exit(int(sys.argv[2]))\n",
    "helper.py": "X = 'published'\n",
    "pkg/mod.py": "Y = 1\n",
}


@pytest.fixture
def stored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``scribble@1.0.0`` in a registry of its own ($DISTCOMP_REGISTRY); its stored folder."""
    src = tmp_path / "src"
    for name, text in SCRIBBLE.items():
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        (src / name).write_text(text)
    root = tmp_path / "registry"
    monkeypatch.setenv("DISTCOMP_REGISTRY", str(root))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    return Path(open_registry(str(root)).publish(src).location)


def distcomp(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", "PYTHONDONTWRITEBYTECODE")}
    return subprocess.run([sys.executable, "-m", "distcomp", "run", *args], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=300)


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() if p.is_file() else b"/" for p in sorted(folder.rglob("*"))}


def check_run(run_dir: Path, state: str) -> None:
    """The job ran the published helper in a copy that is gone; what it wrote beside its code stays."""
    status = json.loads((run_dir / "status.json").read_text())
    assert status["state"] == state
    assert (run_dir / "outputs" / "result" / "saw.txt").read_text() == "published"  # a fresh copy each time
    work = run_dir / "work"
    assert sorted(str(p.relative_to(work)) for p in work.rglob("*")) == [
        "lightning_logs", "lightning_logs/version_0", "lightning_logs/version_0/metrics.csv"]


@pytest.mark.slow
@pytest.mark.parametrize("how", ["reference", "cd into the stored version"])
def test_a_job_writing_beside_its_code_never_changes_the_stored_version(stored: Path, tmp_path: Path,
                                                                          how: str) -> None:
    before = snapshot(stored.parent.parent)
    work = tmp_path / "work"
    work.mkdir()
    for _ in range(2):
        if how == "reference":
            proc = distcomp("scribble@1.0.0", "--no-tracking", cwd=work)
        else:  # tracking on: its default sqlite:///mlflow.db must not land in the registry either
            proc = distcomp(".", cwd=stored)
        assert proc.returncode == 0, proc.stderr  # the old code: the second run failed the hash check
    assert snapshot(stored.parent.parent) == before  # nothing added, nothing changed: not even __pycache__
    assert locate("scribble@1.0.0").parent == stored  # and it still matches its hash
    assert "the job wrote beside its code (stored in the registry, never changed): kept in " in proc.stderr
    runs = tmp_path / ("work" if how == "reference" else "data/distcomp") / "runs"
    found = sorted(runs.iterdir())
    assert len(found) == 2
    for run_dir in found:
        check_run(run_dir, "succeeded")
    if how != "reference":
        assert (tmp_path / "data" / "distcomp" / "mlflow.db").is_file()
        assert "inside a component registry" in proc.stderr


def test_a_failed_job_leaves_no_copy_either(stored: Path, tmp_path: Path) -> None:
    proc = distcomp("scribble@1.0.0", "--no-tracking", "--input", "code=3", "--run-dir", "run", cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    check_run(tmp_path / "run", "failed")
    again = distcomp("scribble@1.0.0", "--no-tracking", "--run-dir", "run", cwd=tmp_path)  # the same run folder
    assert again.returncode == 0, again.stderr
    assert (tmp_path / "run" / "work-2" / "lightning_logs").is_dir()  # the first job's files are not mixed in
    assert sorted(p.name for p in (tmp_path / "run").glob("work*")) == ["work", "work-2"]
    assert locate("scribble@1.0.0").parent == stored


@pytest.mark.parametrize("flag", ["--run-dir", "--output"])
@pytest.mark.parametrize("where", ["in the stored version", "under runs/ of it", "a new version folder",
                                   "the registry's root"])
def test_run_folders_and_outputs_inside_the_registry_are_refused(stored: Path, tmp_path: Path, flag: str,
                                                                 where: str) -> None:
    root = stored.parent.parent
    path = {"in the stored version": stored / "out", "under runs/ of it": stored / "runs" / "x",
            "a new version folder": stored.parent / "2.0.0", "the registry's root": root / "mine"}[where]
    before = snapshot(root)
    work = tmp_path / "work"
    work.mkdir()
    given = [flag, str(path) if flag == "--run-dir" else f"result={path}"]
    for spec in ("scribble@1.0.0", str(stored)):
        proc = distcomp(spec, "--no-tracking", *given, cwd=work)
        assert proc.returncode == 2, proc.stderr
        what = "run folder" if flag == "--run-dir" else "output 'result' (AnyDirectory) at"
        fix = "give --run-dir a folder outside the registry" if flag == "--run-dir" else \
            "give --output result=PATH outside the registry"
        assert proc.stderr == (f"distcomp run: {what} {path} is inside the component registry at {root}, which no "
                               f"job may change; {fix}\n")
    assert snapshot(root) == before and list(work.iterdir()) == []  # nothing was written


@pytest.mark.parametrize("where", ["in the stored version", "the registry's root"])
def test_a_status_file_inside_the_registry_is_refused(stored: Path, tmp_path: Path, where: str) -> None:
    root = stored.parent.parent
    path = stored / "status.json" if where == "in the stored version" else root / "status.json"
    before = snapshot(root)
    work = tmp_path / "work"
    work.mkdir()
    proc = distcomp("scribble@1.0.0", "--no-tracking", "--status-file", str(path), cwd=work)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr == (f"distcomp run: status file {path} is inside the component registry at {root}, which no "
                           "job may change; give --status-file a file outside the registry\n")
    assert snapshot(root) == before and list(work.iterdir()) == []  # nothing ran, nothing was written


def test_inside_store_knows_a_registry_by_its_versions_or_its_location(stored: Path, tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from distcomp.registry import inside_store

    root = stored.parent.parent
    monkeypatch.setenv("DISTCOMP_REGISTRY", str(tmp_path / "configured"))  # not this one: found by its contents
    for path in (root, root / "x", stored.parent, stored.parent / "9.0.0" / "y", stored, stored / "pkg" / "new"):
        assert inside_store(path) == root
    link = tmp_path / "link"
    link.symlink_to(stored)
    assert inside_store(link / "out") == root
    project = tmp_path / "project"
    (project / ".staging").mkdir(parents=True)  # a folder of that name alone is no registry
    for path in (project, project / "runs", tmp_path, tmp_path / "src", Path("/")):
        assert inside_store(path) is None
    assert inside_store(tmp_path / "configured" / "runs") == tmp_path / "configured"  # empty, but configured


def test_the_working_copy_is_verified_and_shares_no_file_with_the_store(stored: Path, tmp_path: Path) -> None:
    from distcomp.registry import working_copy

    copy = working_copy(stored, tmp_path / "w")
    assert copy is not None and copy.code == tmp_path / "w"
    for rel in SCRIBBLE:
        assert (copy.folder / rel).read_bytes() == (stored / rel).read_bytes()
        assert os.stat(copy.folder / rel).st_ino != os.stat(stored / rel).st_ino  # a copy, not a hard link
    (copy.folder / "helper.py").write_text("X = 2\n")  # what a job may do there
    (copy.folder / "notes").mkdir()
    (copy.folder / "notes" / "a.txt").write_text("kept")
    (copy.folder / "pkg" / "__pycache__").mkdir()
    (copy.folder / "pkg" / "__pycache__" / "mod.pyc").write_bytes(b"x")
    assert copy.remove() == ["notes"]
    assert sorted(str(p.relative_to(copy.folder)) for p in copy.folder.rglob("*")) == ["notes", "notes/a.txt"]
    # a folder the job turned into a link (here: to the stored one) is never deleted through
    again = working_copy(stored, tmp_path / "w")
    assert again is not None and again.folder == tmp_path / "w-2"
    shutil.rmtree(again.folder / "pkg")
    (again.folder / "pkg").symlink_to(stored / "pkg")
    assert again.remove() == ["pkg"] and (stored / "pkg" / "mod.py").is_file()
    assert working_copy(tmp_path, tmp_path / "plain") is None and not (tmp_path / "plain").exists()
    # changed after the spec was loaded: the copy says so, and nothing of it is left
    os.chmod(stored / "pkg" / "mod.py", 0o644)
    (stored / "pkg" / "mod.py").write_text("Y = 'evil'\n")
    assert refused(lambda: working_copy(stored, tmp_path / "w2")) == mismatch(stored, "pkg/mod.py changed",
                                                                              "scribble@1.0.0")
    assert not (tmp_path / "w2").exists()
