"""The shell blocks of the README and the docs, run as a reader runs them: shared by
tests/test_readme.py and tests/test_docs.py.

A block's ``/tmp/`` paths go to the test's own folder (``local``), so a run never meets what a
user or another run of the suite left in /tmp, nor leaves anything there; MLflow tracks into
that folder too. A block that cannot run on one machine is marked just before it with
``<!-- not run: WHY -->``."""

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


def shell_env(scratch: Path) -> dict[str, str]:
    """The environment of a reader with the virtualenv active, tracking into ``scratch``."""
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    return {**os.environ, "PATH": path, "MLFLOW_TRACKING_URI": f"sqlite:///{scratch}/mlflow.db"}


def workspace(folder: Path) -> Path:
    """A folder that looks like the clone (a link to each of its entries), so a block's relative
    paths (``examples/...``) work and what it writes by default stays in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    for entry in REPO.iterdir():
        if entry.name not in _OUTPUTS:
            (folder / entry.name).symlink_to(entry)
    return folder


def run_shell(script: str, *, cwd: Path, env: dict[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
    """``script`` run by bash as a reader pastes it: stopping at the first command that fails."""
    return subprocess.run(["bash", "-e", "-o", "pipefail", "-c", script], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)
