"""Bad input, fourth pass: values that are no UTF-8 text or too many digits, a status.json of the
wrong types, the Ray target's --address and --python, an input given twice among other problems,
a name too long for a run folder. Each is refused with exit 2 and one line per problem, no
traceback, and nothing made: no MLflow store or run, no run folder."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from distcomp.errors import UsageError
from distcomp.spec import InputError, loads
from tests.test_bad_input import distcomp, files, refused

SPEC = """\
name: greet
type: DistributedComponent
inputs:
  greeting: {type: String, default: hi}
  n: {type: Integer, default: 1}
  x: {type: Float, default: 0.5}
  api_token: {type: String, default: t}
launcher:
  type: torch.distributed
  process_count_per_node: 1
  additional_arguments: python -c pass {inputs.greeting} {inputs.n} {inputs.x}
"""
# what a shell passes for $'greeting=a\xffb': Python's argv holds the byte as a lone surrogate
NOT_UTF8 = os.fsdecode(b"greeting=a\xffb")
UTF8 = ("input 'greeting': the value is not valid UTF-8 (byte 0xff at character 2); give the value as UTF-8 "
        "text (binary data goes in a file: a path input)")
DIGITS = 5000
LIMIT = sys.get_int_max_str_digits()


@pytest.fixture
def spec(tmp_path: Path) -> Path:
    path = tmp_path / "comp.yaml"
    path.write_text(SPEC)
    return path


def _runs(db: Path) -> int:
    with sqlite3.connect(db) as con:
        return int(con.execute("select count(*) from runs").fetchone()[0])


# -- a value that is not UTF-8 -----------------------------------------------------------------

COMMANDS = {
    "run": (["run"], "distcomp run: "),
    "render": (["render"], "{spec}: "),
    "compile-local": (["compile", "--target", "local"], "distcomp compile: "),
    "compile-slurm": (["compile", "--target", "slurm"], "distcomp compile: "),
    "submit-local": (["submit", "--target", "local"], "distcomp submit: "),
    "submit-slurm": (["submit", "--target", "slurm"], "distcomp submit: "),
    "submit-dryrun": (["submit", "--target", "slurm", "--dryrun"], "distcomp submit: "),
}


@pytest.mark.slow
@pytest.mark.parametrize("command", COMMANDS)
def test_a_value_that_is_not_utf8_is_refused_by_every_command_before_any_store_exists(
        spec: Path, command: str) -> None:
    words, prefix = COMMANDS[command]
    before = files(spec.parent)
    proc = distcomp(*words[:1], str(spec), *words[1:], "-i", NOT_UTF8, cwd=spec.parent)
    refused(proc, prefix.format(spec=spec) + UTF8)
    assert files(spec.parent) == before  # no mlflow.db: no MLflow run left RUNNING


@pytest.mark.slow
@pytest.mark.parametrize("words", [["run"], ["submit", "--target", "slurm"]], ids=["run", "submit-slurm"])
def test_a_value_that_is_not_utf8_leaves_no_run_in_an_existing_store(spec: Path, words: list[str]) -> None:
    db = spec.parent / "mlflow.db"
    made = subprocess.run([sys.executable, "-c", "import mlflow, sys; mlflow.set_tracking_uri(sys.argv[1]); "
                           "mlflow.create_experiment('greet')", f"sqlite:///{db}"], capture_output=True, text=True,
                          timeout=120)
    assert made.returncode == 0, made.stderr
    proc = distcomp(words[0], str(spec), *words[1:], "-i", NOT_UTF8, cwd=spec.parent)
    refused(proc, f"distcomp {words[0]}: {UTF8}")  # no UnicodeEncodeError from the store
    assert _runs(db) == 0


def test_the_library_refuses_a_value_that_is_not_utf8_naming_the_input(tmp_path: Path) -> None:
    import distcomp

    code = tmp_path / "code"
    code.mkdir()
    loaded = loads(SPEC, base_dir=code)
    value = NOT_UTF8.partition("=")[2]
    for call in (lambda: distcomp.render(loaded, inputs={"greeting": value}),
                 lambda: distcomp.compile(loaded, "local", inputs={"greeting": value}),
                 lambda: distcomp.dryrun(loaded, "slurm", inputs={"greeting": value}),
                 lambda: distcomp.run(loaded, inputs={"greeting": value}, tracking=False,
                                      run_dir=str(tmp_path / "run"))):
        with pytest.raises(InputError) as info:
            call()
        assert str(info.value) == UTF8
    assert not (tmp_path / "run").exists()
    # any lone surrogate, not only an undecodable byte of argv
    with pytest.raises(InputError, match=r"not valid UTF-8 \(a lone surrogate \(U\+D800\) at character 1\)"):
        distcomp.render(loaded, inputs={"greeting": "\ud800"})
    with pytest.raises(InputError, match=r"^input 'api_token': the value is not valid UTF-8 \(a lone surrogate"):
        distcomp.render(loaded, inputs={"api_token": "\ud800"})  # a secret's masker cannot take it: not shown


# -- an integer with more digits than Python converts ------------------------------------------


def test_an_integer_input_over_pythons_digit_limit_names_the_input(spec: Path) -> None:
    big = "7" * DIGITS
    loaded = loads(SPEC, base_dir=spec.parent)
    with pytest.raises(InputError) as info:
        import distcomp

        distcomp.render(loaded, inputs={"n": big, "x": big})
    assert str(info.value).splitlines() == [
        f"input 'n' must be an integer of at most {LIMIT} digits (Python's limit), got one of {DIGITS} digits; "
        "pass large data in a file (a path input) instead",
        f"input 'x' must be a number of at most {LIMIT} digits (Python's limit), got one of {DIGITS} digits; "
        "pass large data in a file (a path input) instead"]


@pytest.mark.slow
def test_an_integer_input_over_pythons_digit_limit_is_refused_by_run(spec: Path) -> None:
    before = files(spec.parent)
    refused(distcomp("run", str(spec), "-i", f"n=-{'1' * DIGITS}", cwd=spec.parent),
            f"distcomp run: input 'n' must be an integer of at most {LIMIT} digits (Python's limit), got one of "
            f"{DIGITS} digits; pass large data in a file (a path input) instead")
    assert files(spec.parent) == before


def test_a_default_over_pythons_digit_limit_is_a_located_spec_error(tmp_path: Path) -> None:
    from distcomp.spec import check_text

    text = SPEC.replace("n: {type: Integer, default: 1}", f"n: {{type: Integer, default: {'1' * DIGITS}}}")
    diags = [str(d) for d in check_text(text, "comp.yaml", tmp_path).errors]
    assert diags == [f"comp.yaml:5:31: inputs.n.default: the integer has {DIGITS} digits, over Python's limit of "
                     f"{LIMIT}; quote it to make it a string"]


# -- status.json of the wrong types -------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("record, wrong", [
    ({"state": 5}, "'state' is 5, expected one of: pending, running, succeeded, failed, timed_out, cancelled, "
                   "preempted, unknown"),
    ({"state": "bogus"}, "'state' is \"bogus\", expected one of: pending, running, succeeded, failed, timed_out, "
                         "cancelled, preempted, unknown"),
    ({"state": "running", "supervisor": {"pid": "1"}}, "'supervisor.pid' is \"1\", expected an integer"),
    ({"state": "failed", "root_cause": {"returncode": "x"}}, "'root_cause.returncode' is \"x\", expected an integer"),
    ({"state": "failed", "mlflow": ["x"]}, "'mlflow' is [\"x\"], expected an object"),
], ids=["state-int", "state-unknown", "pid-string", "returncode-string", "mlflow-list"])
def test_status_logs_and_cancel_refuse_a_status_json_of_the_wrong_types(tmp_path: Path, record: dict,
                                                                       wrong: str) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "status.json").write_text(json.dumps(record))
    for command in ("status", "logs", "cancel"):
        refused(distcomp(command, str(run_dir), cwd=tmp_path),
                f"distcomp {command}: {run_dir}/status.json: {wrong}; distcomp did not write this (the file was "
                "edited or replaced): restore it, or give a run folder distcomp made")
    assert json.loads((run_dir / "status.json").read_text()) == record  # left as it was


def test_a_status_json_distcomp_writes_passes_the_type_check() -> None:
    from distcomp.targets.local._status import type_problem

    written = {"state": "failed", "exit_code": 1, "message": "m", "job_id": "j", "started_at": 1.5, "wall_s": 2,
               "outputs": {"model": "/x"}, "mlflow": {"run_id": "r", "tracking_uri": "u", "experiment_id": "1"},
               "root_cause": {"returncode": -9, "detail": "", "tail": ["a"]}, "cookie": "c",
               "supervisor": {"pid": 1, "start_time": 5, "host": "h", "boot_id": None, "watchdog_pid": None}}
    assert type_problem(written) is None
    assert type_problem({"state": "interrupted", "exit_code": None}) is None  # an earlier version's
    assert type_problem({"exit_code": True}) == "'exit_code' is true, expected an integer"


# -- the Ray target's --address and --python ---------------------------------------------------

PYTHON = ("--python 'python; id': give the cluster's Python interpreter as one command name (python3) or one "
          "path (/opt/conda/bin/python), nothing more")


@pytest.mark.slow
@pytest.mark.parametrize("words, line", [
    (["submit", "--target", "ray", "--address", "http://a b"],
     "distcomp submit: --address 'http://a b': give the Jobs API's URL, http://HOST:PORT (the dashboard's port)"),
    (["submit", "--target", "ray", "--address", "http://127.0.0.1:notaport"],
     "distcomp submit: --address 'http://127.0.0.1:notaport': give the Jobs API's URL, http://HOST:PORT "
     "(the dashboard's port)"),
    (["submit", "--target", "ray", "--address", "http://127.0.0.1:1", "--python", "python; id"],
     f"distcomp submit: {PYTHON}"),
    (["compile", "--target", "ray", "--python", "python; id"], f"distcomp compile: {PYTHON}"),
], ids=["address-space", "address-port", "submit-python", "compile-python"])
def test_the_ray_targets_address_and_python_are_checked_before_anything(spec: Path, words: list[str],
                                                                        line: str) -> None:
    before = files(spec.parent)
    refused(distcomp(words[0], str(spec), *words[1:], cwd=spec.parent), line)
    assert files(spec.parent) == before


def test_the_ray_interpreter_is_one_quoted_word_of_the_entrypoint(tmp_path: Path) -> None:
    import distcomp

    loaded = loads(SPEC, base_dir=tmp_path)
    for python, start in (("python3.11", "python3.11 "), ("/opt/conda/bin/python", "/opt/conda/bin/python "),
                          ("/opt/a$b(1)/python", "'/opt/a$b(1)/python' ")):
        entrypoint = distcomp.compile(loaded, "ray", python=python).data["entrypoint"]
        assert entrypoint == start + "-m distcomp_ray.driver"
    for bad in ("python; id", "python -c x", "$(id)", "-c", "py\nthon", "/opt/my env/python", ""):
        if not bad:
            continue  # empty: the default, python
        with pytest.raises(UsageError, match="give the cluster's Python interpreter as one command name"):
            distcomp.compile(loaded, "ray", python=bad)


# -- a name given twice, among the other problems ----------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("words, prefix, lines", [
    (["run", "-o", "nope=x"], "distcomp run: ",
     ["--input greeting is given twice", "unknown output 'nope' (expected one of: none)",
      "input 'n' must be an integer, got 'abc'"]),
    (["render"], "{spec}: ", ["--input greeting is given twice", "input 'n' must be an integer, got 'abc'"]),
    (["compile", "--target", "slurm"], "distcomp compile: ",
     ["--input greeting is given twice", "input 'n' must be an integer, got 'abc'"]),
    (["submit", "--target", "local", "--env", "A=1", "--env", "A=2"], "distcomp submit: ",
     ["--input greeting is given twice", "--env A is given twice", "input 'n' must be an integer, got 'abc'"]),
], ids=["run", "render", "compile", "submit"])
def test_an_input_given_twice_is_reported_with_the_other_problems(spec: Path, words: list[str], prefix: str,
                                                                  lines: list[str]) -> None:
    before = files(spec.parent)
    proc = distcomp(words[0], str(spec), *words[1:], "-i", "greeting=a", "-i", "n=abc", "-i", "greeting=b",
                    cwd=spec.parent)
    first = prefix.format(spec=spec)
    if words[0] == "render":  # render prefixes every line with the spec
        refused(proc, *(first + line for line in lines))
    else:
        refused(proc, first + lines[0], *("  " + line for line in lines[1:]))
    assert files(spec.parent) == before


# -- a name too long for a run folder ----------------------------------------------------------

NAME_LINE = ("{file}:1:7: name: the name is 100000 characters long (expected at most 232); a job's folder is named "
             "NAME-TIME-ID, and a file name has at most 255 bytes: shorten it")


@pytest.mark.slow
def test_a_name_too_long_for_a_run_folder_is_refused_by_validate_run_and_compile(tmp_path: Path) -> None:
    path = tmp_path / "long.yaml"
    path.write_text(SPEC.replace("name: greet", "name: " + "a" * 100_000))
    line = NAME_LINE.format(file=path)
    before = files(tmp_path)
    refused(distcomp("validate", str(path), cwd=tmp_path), line, f"{path}: invalid (1 error)")
    refused(distcomp("run", str(path), cwd=tmp_path), f"distcomp run: {line}")
    refused(distcomp("compile", str(path), "--target", "local", cwd=tmp_path), f"distcomp compile: {line}")
    assert files(tmp_path) == before


@pytest.mark.slow
def test_the_longest_name_validate_accepts_runs(tmp_path: Path) -> None:
    path = tmp_path / "long.yaml"
    path.write_text(SPEC.replace("name: greet", "name: " + "a" * 232).replace(
        " {inputs.greeting} {inputs.n} {inputs.x}", ""))
    assert distcomp("validate", str(path), cwd=tmp_path).returncode == 0
    proc = distcomp("run", str(path), "--no-tracking", "-q", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert len(next((tmp_path / "runs").iterdir()).name) <= 255


@pytest.mark.slow
@pytest.mark.parametrize("flag, line", [
    (["--run-dir", os.fsdecode(b"runs/a\xffb")],
     "distcomp run: run folder {dir}/runs/a\\udcffb is not valid UTF-8 (byte 0xff at character {at}); give --run-dir "
     "a new folder of its own"),
    (["--experiment", os.fsdecode(b"e\xffb")],
     "distcomp run: --experiment 'e\\udcffb' is not valid UTF-8 (byte 0xff at character 2); give the experiment's "
     "name as UTF-8 text"),
], ids=["run-dir", "experiment"])
def test_a_run_folder_or_experiment_that_is_not_utf8_is_refused_before_any_store_exists(
        spec: Path, flag: list[str], line: str) -> None:
    # the MLflow store records both: without the check, its UnicodeEncodeError was a traceback
    before = files(spec.parent)
    refused(distcomp("run", str(spec), *flag, cwd=spec.parent),
            line.format(dir=spec.parent, at=len(str(spec.parent)) + 8))
    assert files(spec.parent) == before
