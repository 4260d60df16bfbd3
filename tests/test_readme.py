"""Every `distcomp` (and `mlflow run`) command the README shows works as written, in order."""

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

README = (REPO / "README.md").read_text()
BLOCKS = re.findall(r"```sh\n(.*?)```", README, re.S)
ASSIGNMENT = re.compile(r"^(?:[A-Z_][A-Z0-9_]*=\S*\s+)*")  # leading NAME=VALUE words, as a shell takes them
COMMANDS = [line.split("#")[0].strip() for block in BLOCKS for line in block.splitlines()
            if ASSIGNMENT.sub("", line.strip()).startswith(("distcomp ", "mlflow run "))]


def test_readme_shows_exactly_the_two_make_commands() -> None:
    make_lines = [line.split("#")[0].strip() for b in BLOCKS for line in b.splitlines() if line.startswith("make ")]
    assert make_lines == ["make demo", "make test"]


def test_readme_has_commands() -> None:
    assert len(COMMANDS) >= 4


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the README's /tmp paths go when the test runs them: this run's own folder, so a run
    never meets what a user (or another run of the suite) left in /tmp, nor leaves anything there."""
    return tmp_path_factory.mktemp("readme-tmp")


def local(text: str, scratch: Path) -> str:
    """``text`` with every ``/tmp/`` path of the README moved into ``scratch``."""
    return text.replace("/tmp/", f"{scratch}/")


@pytest.fixture(scope="module")
def tracking_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """`distcomp run` tracks into this test's own database, not one in the repository."""
    db = tmp_path_factory.mktemp("readme") / "mlflow.db"
    return {**os.environ, "MLFLOW_TRACKING_URI": f"sqlite:///{db}"}


@pytest.mark.parametrize("command", COMMANDS)
def test_readme_command_runs(command: str, tracking_env: dict[str, str], scratch: Path) -> None:
    argv = shlex.split(local(command, scratch))
    env = dict(tracking_env)
    while "=" in argv[0]:
        name, value = argv.pop(0).split("=", 1)
        env[name] = value
    exe = str(Path(sys.executable).with_name(argv[0]))
    proc = subprocess.run([exe, *argv[1:]], cwd=REPO, capture_output=True, text=True, timeout=90, env=env)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr


# the whole programs (fragments that continue a snippet, such as a rank's logging calls, are not)
PYTHON = [code for code in re.findall(r"```python\n(.*?)```", README, re.S) if code.startswith("import distcomp\n")]


@pytest.mark.parametrize("code", PYTHON)
def test_readme_python_block_runs(code: str, tracking_env: dict[str, str], scratch: Path) -> None:
    """The API examples run as written, from the repository's folder, and print what they say."""
    proc = subprocess.run([sys.executable, "-c", local(code, scratch)], cwd=REPO, capture_output=True, text=True, timeout=400,
                          env=tracking_env)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    if "distcomp.run(" in code:
        first, second = proc.stdout.splitlines()[:2]
        assert first.startswith("succeeded 0 ") and len(first.split()[2]) == 32  # state, exit code, MLflow run
        assert second.startswith(f"local:{scratch}/distcomp-readme/api-bg") and second.endswith(" succeeded")


def test_readme_has_the_api_example() -> None:
    assert any("distcomp.run(" in code and "distcomp.submit(" in code for code in PYTHON)


def test_readme_documents_every_builtin_launcher() -> None:
    from distcomp.plugins import PluginManager

    pm = PluginManager()
    pm.load_builtins()
    table = README.split("### Running locally", 1)[1].split("###", 1)[0]
    for name in pm.launchers():
        assert f"| `{name}` |" in table, f"README's launcher table misses {name}"


def test_readme_first_example_is_a_function_component() -> None:
    """The first code a newcomer reads is a function component, shown with the example's own
    lines (in order; ``...`` stands for what is left out), run before any YAML spec."""
    first = re.search(r"```python\n(.*?)```", README, re.S)
    assert first is not None
    head, *lines = first.group(1).splitlines()
    assert head.startswith("# ") and "@distcomp.component(" in first.group(1)
    source = (REPO / head[2:].split()[0]).read_text().splitlines()
    at = 0
    for line in (line for line in lines if line.strip() not in ("", "...")):
        at = source.index(line, at) + 1  # ValueError: the README shows a line the example does not have
    assert COMMANDS[0].startswith(f"distcomp run {head[2:].split()[0]}:train ")
    assert README.index(first.group(0)) < README.index("component.yaml --input")
