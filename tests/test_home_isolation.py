"""The tests never read or write the user's home (issue 33): tests/conftest.py gives each test
process a HOME and XDG_* folders of its own, so a newcomer's earlier jobs (an index under
~/distcomp-slurm, records under ~/.local/state) cannot fail the suite, and the suite leaves
nothing there."""

from __future__ import annotations

import os
import pwd
import subprocess
import sys
from pathlib import Path

XDG = ("XDG_STATE_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "XDG_CONFIG_HOME")


def _real_home() -> Path:
    return Path(pwd.getpwuid(os.getuid()).pw_dir).resolve()


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def test_home_and_xdg_folders_are_the_tests_own() -> None:
    real = _real_home()
    home = Path(os.environ["HOME"]).resolve()
    assert home != real and not _inside(home, real) and home.is_dir()
    for name in XDG:
        folder = Path(os.environ[name]).resolve()
        assert folder.is_dir() and not _inside(folder, real), (name, folder)
    assert "DISTCOMP_SLURM_DIR" not in os.environ and "DISTCOMP_REGISTRY" not in os.environ


def test_distcomp_finds_its_folders_in_the_tests_home() -> None:
    """Where distcomp keeps what it knows of jobs, as a `distcomp` command started by a test
    sees it: the Slurm job dir, the core's records, the functions' cache."""
    code = ("import os\n"
            "from distcomp.targets.slurm._target import default_job_dir\n"
            "from distcomp.core.submission import jobs_dir\n"
            "from distcomp.function._filed import functions_cache\n"
            "for p in (os.path.expanduser('~'), default_job_dir(), jobs_dir(), functions_cache()):\n"
            "    print(p)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    real = _real_home()
    for line in proc.stdout.splitlines():
        assert not _inside(Path(line).resolve(), real), line
    assert proc.stdout.splitlines()[1] == str(Path(os.environ["HOME"]) / "distcomp-slurm")
