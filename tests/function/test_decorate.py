"""``@distcomp.component`` in this process: the spec it makes from the signature, a direct call,
the refusals (each one line, at decoration), and the runner's conversions back to Python types."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import Callable, Literal, Optional

import pytest

import distcomp
from distcomp.function import FunctionError, Param
from distcomp.function._convert import from_text
from distcomp.function._filed import functions_cache

from .conftest import distcomp as cli, explain

CALLS: list[tuple[int, str]] = []


def probe(data: distcomp.Input, model: distcomp.Output, epochs: int = 3, lr: float = 0.01,
          optimizer: Literal["adam", "sgd"] = "adam", amp: bool = False, tag: str = "x",
          init: Optional[distcomp.Input] = None, limit: Optional[int] = None) -> None:
    """Train the probe.

    Details that stay out of the description."""
    CALLS.append((epochs, tag))


def bad_annotation(items: list) -> None:
    pass


def no_annotation(x) -> None:  # type: ignore[no-untyped-def]
    pass


def test_the_spec_from_the_signature() -> None:
    spec = distcomp.component(name="ddp-train", version="1.0.0", nproc_per_node=2, nodes=3,
                              packages=["numpy>=1.26"], image="python:3.11-slim", env={"OMP_NUM_THREADS": 1})(probe).spec
    assert (spec.name, spec.version, spec.description) == ("ddp-train", "1.0.0", "Train the probe.")
    assert (spec.distribution.launcher, spec.distribution.nodes, spec.distribution.processes_per_node) == (
        "torch.distributed", 3, 2)
    i = spec.inputs
    assert (i["epochs"].type, i["epochs"].default, i["epochs"].optional) == ("integer", 3, False)
    assert (i["lr"].type, i["lr"].default) == ("number", 0.01)
    assert (i["optimizer"].type, i["optimizer"].enum, i["optimizer"].default) == ("enum", ("adam", "sgd"), "adam")
    assert (i["amp"].type, i["amp"].default) == ("boolean", False)
    assert i["data"].is_port and not i["data"].optional and i["data"].holds == "any"
    assert i["init"].is_port and i["init"].optional and i["limit"].optional and i["limit"].type == "integer"
    assert list(spec.outputs) == ["model"] and spec.outputs["model"].holds == "any"
    assert spec.environment is not None and spec.environment.image == "python:3.11-slim"
    assert spec.environment.conda["dependencies"][1] == {"pip": ["numpy>=1.26"]}
    assert spec.environment_variables == {"OMP_NUM_THREADS": "1"}
    assert spec.code == Path(__file__).resolve().parents[2]  # the package root: tests/ is a package
    # an optional input left out adds nothing; each value is one word
    argv = spec.render({"data": "/d", "epochs": 2, "lr": 0.5, "optimizer": "sgd", "amp": True, "tag": "a b"},
                       {"model": "/m"})
    assert argv == ["python", "-m", "distcomp.function.run", "tests.function.test_decorate:probe", "--data", "/d",
                    "--model", "/m", "--epochs", "2", "--lr", "0.5", "--optimizer", "sgd", "--amp", "True",
                    "--tag", "a b"]


def test_default_name_and_the_spec_text_is_what_loads() -> None:
    made = distcomp.component(probe)
    assert made.name == "probe" and made.spec.name == "probe"
    from distcomp.spec import loads

    assert loads(made.spec_text(), "x", made.code) == made.spec


def test_max_restarts_is_the_spec_s_and_plans_take_it() -> None:
    from distcomp.core.plan import make_plan

    made = distcomp.component(max_restarts=2)(probe)
    assert made.spec.distribution.max_restarts == 2 and "max_restarts: 2" in made.spec_text()
    assert make_plan(made.spec).max_restarts == 2 and make_plan(made.spec, max_restarts=0).max_restarts == 0
    assert distcomp.component(probe).spec.distribution.max_restarts is None  # not written: 0, or the flag
    with pytest.raises(FunctionError) as e:
        distcomp.component(max_restarts=-1)(probe)
    assert "max_restarts must be an integer >= 0 (got -1)" in _one_line(e)


def test_calling_it_runs_the_plain_function_once_here() -> None:
    made = distcomp.component(probe)
    CALLS.clear()
    assert made("/data", "/model", epochs=7, tag="t") is None
    assert CALLS == [(7, "t")]
    assert made.__name__ == "probe" and made.__doc__ is not None and made.__doc__.startswith("Train the probe.")


def test_any_spec_taker_takes_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    made = distcomp.component(probe)
    loaded = distcomp.load(made)  # the spec, from its file in the cache: what a target reads or ships
    assert loaded.source is not None and loaded.source.parent.parent == functions_cache()
    assert functions_cache() == tmp_path / "cache" / "distcomp" / "functions"
    assert loaded == dataclasses.replace(made.spec, source=loaded.source)
    assert distcomp.load(str(loaded.source)) == loaded  # the file holds it, its code folder the project's
    loaded.source.write_text("name: changed\n")  # a file changed in the cache is written again
    assert distcomp.load(made).source == loaded.source  # the same file each time
    assert distcomp.load(str(loaded.source)) == loaded
    report = distcomp.validate(made)
    assert report.ok and report.files[0].summary() == "probe (torch.distributed, 1 node x 1 process)"
    line = distcomp.render(made, inputs={"data": str(tmp_path), "tag": "it's $(x)"}).line
    assert "--tag 'it'\"'\"'s $(x)'" in line


def _one_line(exc: pytest.ExceptionInfo[FunctionError]) -> str:
    text = str(exc.value)
    assert "\n" not in text and isinstance(exc.value, distcomp.errors.UsageError)
    return text


def test_refusals_are_one_line_errors_at_decoration() -> None:
    with pytest.raises(FunctionError) as e:
        distcomp.component(lambda x: x)
    assert "is a lambda" in _one_line(e)

    def nested(x: int) -> None:
        pass

    with pytest.raises(FunctionError) as e:
        distcomp.component(nested)
    assert "is nested in test_refusals_are_one_line_errors_at_decoration()" in _one_line(e)

    factor = 3

    def closure(x: int) -> int:
        return x * factor

    with pytest.raises(FunctionError) as e:
        distcomp.component(closure)
    assert "nested" in _one_line(e)  # nested comes first; a closure at module level cannot be written

    with pytest.raises(FunctionError) as e:
        distcomp.component(bad_annotation)
    text = _one_line(e)
    assert "parameter 'items'" in text and "annotation list is not a component type" in text
    assert "int, float, bool, str, Literal[...], distcomp.Input, distcomp.Output" in text

    with pytest.raises(FunctionError) as e:
        distcomp.component(no_annotation)
    assert "parameter 'x' has no annotation" in _one_line(e)

    with pytest.raises(FunctionError) as e:
        distcomp.component(nproc_per_node=0)(probe)
    assert "nproc_per_node must be an integer >= 1" in _one_line(e)


def test_a_closure_is_refused() -> None:
    """A closure made at module level through a factory's code object: no nested qualname."""
    def make() -> Callable[[int], int]:
        size = 2

        def scaled(x: int) -> int:
            return x * size
        return scaled

    fn = make()
    fn.__qualname__ = "scaled"  # as if it were top-level: the free variable still refuses it
    with pytest.raises(FunctionError) as e:
        distcomp.component(fn)
    assert "is a closure over size" in _one_line(e)


def test_no_file_behind_it_is_refused() -> None:
    namespace: dict[str, object] = {"__name__": "__main__not_a_file"}
    exec("def f(x: int) -> None:\n    pass\n", namespace)
    with pytest.raises(FunctionError) as e:
        distcomp.component(namespace["f"])
    assert "no file behind it (a notebook or a REPL)" in _one_line(e)


def test_the_cli_reports_a_refused_function_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "bad.py").write_text("import distcomp\n\n@distcomp.component\ndef f(x: dict):\n    pass\n",
                                     encoding="utf-8")
    (tmp_path / "plain.py").write_text("def g(x: int):\n    pass\n", encoding="utf-8")
    for args, expected in ((("run", "bad.py:f"), "parameter 'x': annotation dict is not a component type"),
                           (("validate", "plain.py:g"), "g is a function, not a component: decorate it with"),
                           (("render", "plain.py:nope"), "has no 'nope'"),
                           (("compile", "gone.py:f", "--target", "slurm"), "no such file gone.py")):
        proc = cli(tmp_path, *args)
        assert proc.returncode == 2, explain(proc)
        assert expected in proc.stderr and "Traceback" not in proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr


@pytest.mark.parametrize("param, text, value", [
    (Param("n", "parameter", "integer"), "3", 3),
    (Param("x", "parameter", "number"), "1e-05", 1e-05),
    (Param("b", "parameter", "boolean"), "True", True),
    (Param("b", "parameter", "boolean"), "false", False),
    (Param("s", "parameter", "string"), " it's $(x) ", " it's $(x) "),
    (Param("e", "parameter", "enum", choices=("a", 2, True)), "2", 2),
    (Param("e", "parameter", "enum", choices=("a", 2, True)), "True", True),
])
def test_values_come_back_with_their_types(param: Param, text: str, value: object) -> None:
    got = from_text(param, text)
    assert got == value and type(got) is type(value)


def test_ports_arrive_as_str_paths() -> None:
    got = from_text(Param("d", "input", "path"), "/data dir")
    assert isinstance(got, distcomp.Input) and isinstance(got, str) and got == "/data dir"


def test_the_runner_makes_each_output_folder_as_a_local_run_does(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """On a target that makes no output folder (a Kubeflow pod's volume) the function still gets
    one; an existing file is left as it is; a folder that cannot be made fails the rank, said."""
    from distcomp.function.run import main

    monkeypatch.setattr(sys, "path", list(sys.path))  # the runner puts its code folder first
    target = f"{__name__}:probe"
    made = tmp_path / "a" / "model"
    assert main([target, "--data", str(tmp_path), "--model", str(made), "--epochs", "5"]) == 0
    assert made.is_dir() and CALLS[-1] == (5, "x")
    file = tmp_path / "model.pt"
    file.write_text("kept")
    assert main([target, "--data", str(tmp_path), "--model", str(file)]) == 0
    assert file.read_text() == "kept"
    calls = len(CALLS)
    assert main([target, "--data", str(tmp_path), "--model", str(file / "sub")]) == 1
    assert len(CALLS) == calls  # not called
    assert f"cannot make the folder of output 'model' at {file / 'sub'}: Not a directory" in capsys.readouterr().err


def test_a_cache_it_cannot_write_is_one_line_naming_what_to_do(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "cache").write_text("a file, not a folder")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    with pytest.raises(FunctionError) as e:
        distcomp.compile(distcomp.component(probe), "kfp")
    assert "cannot write its spec file" in _one_line(e) and "set XDG_CACHE_HOME to a folder you may write" in str(e.value)
