"""The docs site builds (``mkdocs build --strict``, offline) and every shell block of its pages
that can run on one machine runs as written, each page in a temporary folder of its own."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests._shellblocks import (NOT_RUN, SHELL, Block, blocks, left_behind, local, prose, run_shell, shell_env,
                                snapshot, unmapped, workspace)
from tests.conftest import REPO

DOCS = REPO / "docs"
PAGES = sorted(DOCS.rglob("*.md"))
# the start of a command line (not of the output a command prints: "distcomp run: ...")
COMMAND = re.compile(r"\$ |(distcomp|mlflow) [a-z-]+ [^:]|make |\.venv/bin/python |dev/\w+/cluster\.sh ")


def _name(page: Path) -> str:
    return page.relative_to(DOCS).as_posix()


def _shell(page: Path) -> list[Block]:
    return [b for b in blocks(page.read_text()) if b.lang in SHELL]


def _programs(page: Path) -> list[str]:
    """The page's whole Python programs (fragments that continue a snippet are not run)."""
    return [b.body for b in blocks(page.read_text()) if b.lang == "python" and b.body.startswith("import distcomp\n")]


RUNNABLE = [page for page in PAGES if any(b.not_run is None for b in _shell(page)) or _programs(page)]


@pytest.mark.slow
def test_site_builds_strict_and_offline(tmp_path: Path) -> None:
    """Every warning is an error (a broken link, a missing page, an API name that moved); the
    field reference is generated from the schema, the API from the docstrings."""
    site = tmp_path / "site"
    env = {**shell_env(), "NO_MKDOCS_2_WARNING": "1"}
    proc = subprocess.run([str(Path(sys.executable).with_name("mkdocs")), "build", "--strict", "--site-dir", str(site)],
                          cwd=REPO, capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr
    from distcomp.spec import json_schema

    reference = (site / "spec-reference" / "index.html").read_text()
    for dialect in ("sdk", "v2", "draft"):
        for name in json_schema(dialect)["properties"]:
            assert f"<code>{name}</code>" in reference, f"field reference misses {dialect}'s {name}"
    assert "<code>inputs.NAME.min</code>" in reference  # a field only some input types have
    api = (site / "api" / "index.html").read_text()
    for name in ("distcomp.api.run", "distcomp.api.submit", "distcomp.function._component.component",
                 "distcomp.registry._api.publish"):
        assert f'id="{name}"' in api, f"the API page misses {name}"
    assert "FlatStore" in (site / "plugins" / "index.html").read_text()  # the hooks' examples, from hookspec.py
    architecture = (site / "architecture" / "index.html").read_text()
    assert "runtime never imports tracking" in architecture  # pyproject's contracts, generated
    assert not list(site.rglob("hooks")), "the build hook is no page"


def test_every_skipped_block_says_why() -> None:
    """A block left out of the run names what it needs, and a marker always precedes a block."""
    for page in PAGES:
        text = page.read_text()
        marked = [b for b in blocks(text) if b.not_run is not None]
        assert len(marked) == len(NOT_RUN.findall(prose(text))), f"{_name(page)}: a 'not run' marker not just before a block"
        for block in marked:
            assert block.lang in SHELL, f"{_name(page)}:{block.line}: only a shell block is marked 'not run'"
            assert len(block.not_run.split()) >= 3, f"{_name(page)}:{block.line}: say why it is not run"


def test_shell_blocks_are_tagged() -> None:
    """A block of commands is tagged sh or bash (so it is run or says why); text blocks show output."""
    for page in PAGES:
        for block in blocks(page.read_text()):
            if block.lang in ("", "text", "console"):
                assert not COMMAND.match(block.body), f"{_name(page)}:{block.line}: commands in an untagged block"


def test_run_blocks_write_only_where_the_test_maps() -> None:
    """Every place a run block or program writes is under /tmp/, which the test moves into its own folder."""
    for page in RUNNABLE:
        for block in blocks(page.read_text()):
            if (block.lang in SHELL and block.not_run is None) or block.body in _programs(page):
                where = unmapped(block.body)
                assert not where, f"docs/{_name(page)}:{block.line}: {where} would stay outside the test's folder"


def test_the_docs_have_commands_to_run() -> None:
    assert {"getting-started.md", "registry.md", "targets/local.md", "targets/index.md"} <= {_name(p) for p in RUNNABLE}


@pytest.mark.slow
@pytest.mark.parametrize("page", [pytest.param(p, id=_name(p)) for p in RUNNABLE])
def test_page_commands_run(page: Path, tmp_path: Path) -> None:
    """Each runnable block of the page, in order, from a copy-like folder of the clone: what a
    block writes by default (run folders, MLflow's default store) stays in this test's folder,
    and nothing it leaves shows in the clone's `git status`."""
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    clone = workspace(tmp_path / "clone")
    env = shell_env()
    for block in _shell(page):
        if block.not_run is None:
            before = snapshot(clone)
            proc = run_shell(local(block.body, scratch), cwd=clone, env=env, timeout=900)
            assert proc.returncode == 0, f"docs/{_name(page)}:{block.line}: {proc.stderr[-3000:]}"
            assert "Traceback" not in proc.stderr, f"docs/{_name(page)}:{block.line}: {proc.stderr[-3000:]}"
            left = left_behind(before, clone)
            assert not left, f"docs/{_name(page)}:{block.line}: the block left {'; '.join(left)}"
    for python in _programs(page):
        before = snapshot(clone)
        proc = subprocess.run([sys.executable, "-c", local(python, scratch)], cwd=clone, capture_output=True, text=True,
                              timeout=600, env=env)
        assert proc.returncode == 0, f"docs/{_name(page)}: {proc.stderr[-3000:]}"
        assert "Traceback" not in proc.stderr
        left = left_behind(before, clone)
        assert not left, f"docs/{_name(page)}: its Python program left {'; '.join(left)}"
        if "distcomp.run(" in python:
            first, second = proc.stdout.splitlines()[:2]
            assert first.startswith("succeeded 0 ") and len(first.split()[2]) == 32  # state, exit code, MLflow run
            assert re.match(rf"local:{re.escape(str(scratch))}/distcomp-docs/api-bg\S* succeeded$", second)


def test_local_target_page_documents_every_builtin_launcher() -> None:
    from distcomp.core.plugins import PluginManager

    pm = PluginManager()
    pm.load_builtins()
    table = (DOCS / "targets" / "local.md").read_text().split("| launcher |", 1)[1].split("\n\n", 1)[0]
    for name in pm.launchers():
        assert f"| `{name}` |" in table, f"the local target's launcher table misses {name}"


def test_api_page_has_the_compile_and_submit_example() -> None:
    assert any("distcomp.run(" in code and "distcomp.submit(" in code for code in _programs(DOCS / "api.md"))
