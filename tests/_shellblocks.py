"""The shell blocks of the README and the docs, run as a reader runs them: shared by
tests/test_readme.py and tests/test_docs.py.

A block's ``/tmp/`` paths go to the test's own folder (``local``), so a run never meets what a
user or another run of the suite left in /tmp, nor leaves anything there. The blocks run from a
``workspace`` that stands for the clone, with MLflow's default store (``sqlite:///mlflow.db``
there, as a reader without ``MLFLOW_TRACKING_URI`` gets it), and ``left_behind`` tells what
they left that a clone's ``git status`` would show. A block that cannot run on one machine is
marked just before it with ``<!-- not run: WHY -->``."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import REPO

SHELL = ("sh", "bash")
_FENCE = re.compile(r"^(?:<!-- not run: (?P<why>.*?) -->\n)?```(?P<lang>[\w-]*)\n(?P<body>.*?)^```[ \t]*$", re.M | re.S)
NOT_RUN = re.compile(r"<!-- not run:(.*?)-->", re.S)
# what a reader's commands write beside them by default: never linked into a workspace
_OUTPUTS = {".git", "runs", "outputs", "local_outputs", "mlruns", "mlflow.db", "mlflow.db.lock", "build", "site",
            "kfp_pipeline.yaml", ".pytest_cache", ".mypy_cache", ".ruff_cache", ".hypothesis"}


@dataclass(frozen=True)
class Block:
    lang: str
    body: str
    line: int  # of the opening fence, 1-based
    not_run: str | None  # why it is not run, when marked


def blocks(text: str) -> list[Block]:
    """Every fenced block of a markdown text, in order."""
    found = []
    for m in _FENCE.finditer(text):
        fence = m.start("lang") - 3
        found.append(Block(m.group("lang"), m.group("body"), text.count("\n", 0, fence) + 1,
                           None if m.group("why") is None else m.group("why").strip()))
    return found


def prose(text: str) -> str:
    """``text`` with the bodies of its blocks left out (a marker shown as an example is no marker)."""
    return _FENCE.sub(lambda m: m.group(0).replace(m.group("body"), ""), text)


def local(text: str, scratch: Path) -> str:
    """``text`` with every ``/tmp/`` path moved into ``scratch``."""
    return text.replace("/tmp/", f"{scratch}/")


# a place outside the test's folder that ``local`` does not move: the home folder, a temporary
# folder of the system's choosing, /tmp itself
_UNMAPPED = re.compile(r"(?<![\w$])~|\$\{?(?:HOME|TMPDIR)\b|\bmktemp\b|(?<![\w.])/tmp(?!/)")


def unmapped(text: str) -> list[str]:
    """The places in a block that ``local`` would leave where they are (a run would write there)."""
    return [m.group(0) for m in _UNMAPPED.finditer(text)]


def shell_env() -> dict[str, str]:
    """The environment of a reader with the virtualenv active and no ``MLFLOW_TRACKING_URI``:
    a job tracks into the default store where it starts (in a ``workspace``, not the clone)."""
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    env = {**os.environ, "PATH": path}
    env.pop("MLFLOW_TRACKING_URI", None)
    return env


def workspace(folder: Path, repo: Path = REPO) -> Path:
    """A folder that looks like the clone ``repo`` (a link to each of its entries), so a block's
    relative paths (``examples/...``) work and what it writes at the top stays in ``folder``
    (what it writes inside a linked folder lands in the clone: ``left_behind`` tells)."""
    folder.mkdir(parents=True, exist_ok=True)
    for entry in repo.iterdir():
        if entry.name not in _OUTPUTS:
            (folder / entry.name).symlink_to(entry)
    return folder


@dataclass(frozen=True)
class Snapshot:
    """What ``left_behind`` compares against: the clone's untracked files and a workspace's top."""
    repo: Path
    untracked: frozenset[str]
    top: frozenset[str]


def _untracked(repo: Path) -> frozenset[str]:
    """The files ``git status`` shows untracked in the clone, each on its own (not its folder)."""
    proc = subprocess.run(["git", "-C", str(repo), "ls-files", "-z", "--others", "--exclude-standard"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, f"git ls-files in {repo} (the tests run from a clone): {proc.stderr.strip()}"
    return frozenset(filter(None, proc.stdout.split("\0")))


def _ignored(repo: Path, name: str) -> bool:
    """Whether the clone's .gitignore covers ``name`` (a top-level entry; a folder ends in /)."""
    proc = subprocess.run(["git", "-C", str(repo), "check-ignore", "--no-index", "-q", name], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode in (0, 1), f"git check-ignore {name}: {proc.stderr.strip()}"
    return proc.returncode == 0


def snapshot(folder: Path, repo: Path = REPO) -> Snapshot:
    """The state of ``repo`` and of its workspace ``folder`` before a block runs."""
    return Snapshot(repo, _untracked(repo), frozenset(os.listdir(folder)))


def left_behind(before: Snapshot, folder: Path) -> list[str]:
    """What the commands run in the workspace ``folder`` since ``before`` left that ``git status``
    shows untracked in a clone: a new entry at its top that .gitignore does not cover (a reader's
    clone has it at its own top), or a new file in the clone itself (written through a linked
    folder such as examples/). Only new untracked files count, not changes to tracked ones: what
    a developer has or edits meanwhile is no block's doing (a file they create meanwhile is named
    too, so the message says which)."""
    found = [f"{path} in the clone, untracked" for path in sorted(_untracked(before.repo) - before.untracked)]
    for name in sorted(set(os.listdir(folder)) - before.top):
        if not _ignored(before.repo, name + "/" if (folder / name).is_dir() else name):
            found.append(f"{name} at the clone's top, which .gitignore does not cover")
    return found


def run_shell(script: str, *, cwd: Path, env: dict[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
    """``script`` run by bash as a reader pastes it: stopping at the first command that fails."""
    return subprocess.run(["bash", "-e", "-o", "pipefail", "-c", script], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)
