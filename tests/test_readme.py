"""Every `distcomp` (and `mlflow run`) command the README shows works as written, in order, and
the README stays a short front page that shows its first component as the files hold it."""

import re
from pathlib import Path

import pytest

from tests._shellblocks import SHELL, blocks, left_behind, local, run_shell, shell_env, snapshot, unmapped, workspace
from tests.conftest import REPO

README = (REPO / "README.md").read_text()
BLOCKS = [b for b in blocks(README) if b.lang in SHELL]
ASSIGNMENT = re.compile(r"^(?:[A-Z_][A-Z0-9_]*=\S*\s+)*")  # leading NAME=VALUE words, as a shell takes them
COMMANDS = [line.split("#")[0].strip() for block in BLOCKS if block.not_run is None for line in block.body.splitlines()
            if ASSIGNMENT.sub("", line.strip()).startswith(("distcomp ", "mlflow run "))]


def test_readme_shows_the_make_commands_and_the_makefile_has_them() -> None:
    make_lines = [line.split("#")[0].strip() for b in BLOCKS for line in b.body.splitlines() if line.startswith("make ")]
    assert make_lines == ["make demo", "make test-fast", "make test"]
    makefile = (REPO / "Makefile").read_text()
    assert all(re.search(rf"^{line.split()[1]}:", makefile, re.M) for line in make_lines), make_lines


def test_readme_has_commands() -> None:
    assert len(COMMANDS) >= 4


def test_readme_commands_write_only_where_the_test_maps() -> None:
    """Every place a command writes is under /tmp/, which the test moves into its own folder."""
    for block in BLOCKS:
        if block.not_run is None:
            assert not unmapped(block.body), f"README.md:{block.line}: {unmapped(block.body)} would stay outside the test"


def test_readme_is_a_front_page() -> None:
    """At most 300 lines; the rest lives in docs/, and every page of it is linked."""
    assert len(README.splitlines()) <= 300
    for page in (REPO / "docs").rglob("*.md"):
        assert f"(docs/{page.relative_to(REPO / 'docs').as_posix()})" in README, f"README links no {page.name}"


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the README's /tmp paths go when the test runs them: this run's own folder, so a run
    never meets what a user (or another run of the suite) left in /tmp, nor leaves anything there."""
    return tmp_path_factory.mktemp("readme-tmp")


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder the commands run from: it looks like the clone, and what they write by default
    (MLflow's default store, with no MLFLOW_TRACKING_URI set, and run folders) stays in it."""
    return workspace(tmp_path_factory.mktemp("readme-clone"))


@pytest.mark.slow
@pytest.mark.parametrize("command", COMMANDS)
def test_readme_command_runs(command: str, scratch: Path, clone: Path) -> None:
    """Each command as a reader runs it, in order; it leaves nothing that `git status` shows."""
    before = snapshot(clone)
    proc = run_shell(local(command, scratch), cwd=clone, env=shell_env(), timeout=90)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    left = left_behind(before, clone)
    assert not left, f"README.md: `{command}` left {'; '.join(left)}"


def _shown(path: str) -> str:
    """The file as the README shows it: after its path, in a block of its own."""
    for block in blocks(README):
        if block.body.startswith(f"# {path}\n"):
            return block.body.split("\n", 1)[1]
    raise AssertionError(f"the README does not show {path}")


@pytest.mark.parametrize("path", ["examples/first-step/function.py", "examples/first-step/step.py",
                                  "examples/first-step/component.yaml"])
def test_readme_shows_the_first_component_as_it_is(path: str) -> None:
    """The inline component is the example's own text (after its docstring), so it cannot drift."""
    source = (REPO / path).read_text()
    if path.endswith(".py"):
        source = source.split('"""', 2)[2].lstrip()
    assert _shown(path) == source


def test_readme_first_example_is_a_function_component() -> None:
    """The first code a newcomer reads is a function component, run before any YAML spec."""
    first = next(b for b in blocks(README) if b.lang == "python")
    assert first.body.startswith("# examples/first-step/function.py\n") and "@distcomp.component(" in first.body
    function = re.search(r"^def (\w+)\(", first.body, re.M)
    assert function is not None
    assert COMMANDS[0].startswith(f"distcomp run examples/first-step/function.py:{function.group(1)} ")
    assert README.index(first.body) < README.index("component.yaml --input")
