"""docs/architecture.md names the layers and the path of one job: every module and path it names
exists, its drawing of the layers is the import-linter contract's, and the package root keeps
only the public faces (issue 35: at most 12 modules)."""

from __future__ import annotations

import importlib
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "plugin" / "distcomp"
DOC = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")


def _blocks() -> list[str]:
    return re.findall(r"```\n(.*?)```", DOC, re.S)


def test_every_path_it_names_exists() -> None:
    paths = set(re.findall(r"`(plugin/distcomp/[\w/.]*)`", DOC))
    assert len(paths) > 20
    missing = sorted(p for p in paths if not (ROOT / p).exists())
    assert missing == []


def test_every_dotted_module_it_names_imports() -> None:
    names = set(re.findall(r"`(distcomp(?:\.\w+)+)", DOC))
    assert {"distcomp.core.plan", "distcomp.base.codefolder"} <= names
    missing = []
    for name in sorted(names):
        parts = name.split(".")
        for n in range(len(parts), 0, -1):  # the longest module, then attributes on it
            try:
                obj = importlib.import_module(".".join(parts[:n]))
            except ImportError:
                continue
            try:
                for attr in parts[n:]:
                    obj = getattr(obj, attr)
            except AttributeError:
                missing.append(name)
            break
    assert missing == []


def test_the_path_of_one_job_names_modules_that_exist() -> None:
    drawing = next(b for b in _blocks() if "make_plan(spec)" in b)
    # the right-hand column: where each step lives, relative to the package
    column = "\n".join(line[62:] for line in drawing.splitlines())
    named = set(re.findall(r"(?<![\w/])((?:[a-z_]+/)+(?:\w+\.py)?|[a-z_]+\.py)", column))
    assert {"core/plan.py", "core/submission.py", "agent/_node.py", "records.py"} <= named
    missing = sorted(n for n in named if not (PACKAGE / n).exists())
    assert missing == []


def test_the_layers_drawn_are_the_contracts() -> None:
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    layers = next(c["layers"] for c in contracts if c["type"] == "layers")
    drawing = next(b for b in _blocks() if b.startswith("worker "))
    drawn = [line.split("  ")[0].strip() for line in drawing.splitlines() if line and not line.startswith(" ")]
    assert drawn == [layer.replace("distcomp.", "") for layer in layers]


def test_the_package_root_keeps_only_the_public_faces() -> None:
    modules = sorted(p.stem for p in PACKAGE.glob("*.py"))
    assert len(modules) <= 12, modules
    for name in modules:  # each one the doc names as a face
        if name not in ("__init__", "__main__"):
            assert f"`{name}`" in DOC, name
