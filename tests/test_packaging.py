"""The package's metadata as setuptools builds it from pyproject.toml: the licence in today's
form (an SPDX expression, PEP 639), which builds with no deprecation warning."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUILD = "import sys; from setuptools import build_meta as b; print(b.prepare_metadata_for_build_wheel(sys.argv[1]))"


def test_the_metadata_says_mit_and_setuptools_warns_of_nothing(tmp_path: Path) -> None:
    """What `pip install -e .` asks setuptools first, in a copy (the clone gets no egg-info)."""
    (tmp_path / "plugin" / "distcomp").mkdir(parents=True)
    for name in ("pyproject.toml", "README.md", "plugin/distcomp/__init__.py"):
        shutil.copy(ROOT / name, tmp_path / name)
    out = tmp_path / "out"
    out.mkdir()
    proc = subprocess.run([sys.executable, "-W", "always", "-c", BUILD, str(out)], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "license" not in proc.stderr.lower(), proc.stderr  # the table form warns: it stops working in 2027
    metadata = (out / proc.stdout.split()[-1] / "METADATA").read_text()
    assert "License-Expression: MIT" in metadata.splitlines(), metadata


def test_the_build_requires_a_setuptools_that_reads_an_spdx_licence() -> None:
    """`license = "MIT"` is read by setuptools 77 and later; an older one would refuse it."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert project["project"]["license"] == "MIT"
    assert "setuptools>=77" in project["build-system"]["requires"]
