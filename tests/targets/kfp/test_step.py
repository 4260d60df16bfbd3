"""The step's `distcomp run` command from the values KFP hands the function, and the argv
distcomp then renders from it: an optional input KFP did not deliver takes its block away."""

from pathlib import Path
from types import SimpleNamespace

from distcomp.spec import bind_inputs, load
from distcomp.targets.kfp._step import step_argv
from tests.targets.kfp.conftest import ECHO


def given(argv: list[str]) -> dict[str, str]:
    """The --input NAME=VALUE pairs of a distcomp run command."""
    pairs = [argv[i + 1] for i, word in enumerate(argv) if word == "--input"]
    return dict(pair.split("=", 1) for pair in pairs)


def test_values_become_inputs_and_absent_optionals_none() -> None:
    out = SimpleNamespace(path="/kfp/out")
    inputs = {"name": ("string", "a=b c"), "count": ("integer", 7.0), "ratio": ("number", 2),
              "flag": ("boolean", False), "mode": ("enum", "slow"), "fail_rank": ("integer", -1),
              "opt": ("number", None), "extra": ("port", None)}
    argv = step_argv("py", "/b/component.yaml", "/b/run", inputs, {"out": out}, ["--nproc-per-node", "3"], False)
    assert argv[:9] == ["py", "-m", "distcomp", "run", "/b/component.yaml", "--run-dir", "/b/run",
                        "--nproc-per-node", "3"]
    assert given(argv) == {"name": "a=b c", "count": "7", "ratio": "2.0", "flag": "false", "mode": "slow",
                           "fail_rank": "-1"}
    assert argv[-3:] == ["--output", "out=/kfp/out", "--no-tracking"]

    spec = load(ECHO)
    rendered = spec.render(bind_inputs(spec, given(argv)), {"out": "/kfp/out"})
    assert rendered == ["python", "echo.py", "--name", "a=b c", "--count", "7", "--ratio", "2.0", "--flag", "False",
                        "--mode", "slow", "--fail-rank", "-1", "--out", "/kfp/out"]


def test_delivered_optionals_bring_their_blocks(tmp_path: Path) -> None:
    inputs = {"name": ("string", "x"), "opt": ("number", 0.5), "extra": ("port", SimpleNamespace(path=str(tmp_path)))}
    argv = step_argv("py", "s.yaml", "run", inputs, {}, [], True, "pipelines")
    assert "--no-tracking" not in argv and argv[-2:] == ["--experiment", "pipelines"]
    spec = load(ECHO)
    rendered = spec.render(bind_inputs(spec, given(argv)), {"out": "/o"})
    assert rendered[-6:] == ["--opt", "0.5", "--extra", str(tmp_path), "--out", "/o"]
