"""The runner of the README's and the docs' blocks (tests/_shellblocks.py) catches what a block
leaves in a clone, on a git repository of its own: the check the docs tests rely on."""

import subprocess
from pathlib import Path

import pytest

from tests._shellblocks import left_behind, run_shell, shell_env, snapshot, unmapped, workspace


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.invalid", *args],
                   check=True, capture_output=True, timeout=60)


def test_left_behind_names_what_git_status_would_show(tmp_path: Path) -> None:
    repo = tmp_path / "clone"
    (repo / "examples").mkdir(parents=True)
    (repo / "examples" / "spec.yaml").write_text("a\n")
    (repo / "README.md").write_text("r\n")
    (repo / ".gitignore").write_text("runs/\nmlflow.db\n")
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "first")
    (repo / "README.md").write_text("edited by the developer\n")  # changed before the run: not the block's
    (repo / "notes.txt").write_text("the developer's\n")  # untracked before the run: not the block's
    folder = workspace(tmp_path / "ws", repo)
    before = snapshot(folder, repo)
    script = ("touch examples/new.txt mlflow.db kfp.yaml && mkdir runs out && touch runs/a out/b"
              " && echo more >> README.md && echo b >> examples/spec.yaml && mkdir examples/runs && touch examples/runs/c"
              " && echo more >> notes.txt")
    proc = run_shell(script, cwd=folder, env=shell_env(), timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert left_behind(before, folder) == [
        "examples/new.txt in the clone, untracked",  # through the linked folder
        "kfp.yaml at the clone's top, which .gitignore does not cover",
        "out at the clone's top, which .gitignore does not cover"]  # runs/, mlflow.db, examples/runs/: ignored
    assert left_behind(snapshot(folder, repo), folder) == []  # only what is new since the snapshot


def test_blocks_run_without_the_callers_tracking_uri(monkeypatch: pytest.MonkeyPatch) -> None:
    """A reader without MLFLOW_TRACKING_URI gets the default store: the runner's blocks too."""
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "sqlite:////somewhere/else.db")
    assert "MLFLOW_TRACKING_URI" not in shell_env()


def test_unmapped_finds_places_outside_the_tests_folder() -> None:
    assert unmapped("cd ~/x; echo $HOME ${TMPDIR}; d=$(mktemp -d); ls /tmp") == ["~", "$HOME", "${TMPDIR", "mktemp",
                                                                                  "/tmp"]
    assert unmapped("--run-dir /tmp/x MLFLOW_TRACKING_URI=sqlite:////tmp/m.db a~b") == []
