"""Command templates: the author's shell line, each value one quoted word. Each case RUNS what
renders (the words, or /bin/sh -c LINE) with programs on PATH that print the argv they got, so
what is checked is what a training script would receive."""

import json
import os
import stat
import subprocess
from pathlib import Path

import pytest

from distcomp.spec import InputError, bind_inputs, loads, render_value
from distcomp.spec._template import parse

V1 = """
name: t
type: DistributedComponent
inputs:
  name: {{type: String}}
  tag: {{type: String, optional: true}}
  flag: {{type: Boolean, default: true}}
  n: {{type: Integer, default: 3}}
  lr: {{type: Float, default: 0.00001}}
  data: {{type: AnyDirectory, optional: true}}
outputs:
  model: {{type: AnyDirectory}}
launcher:
  type: mpi
  additional_arguments: {command}
"""

V2 = """
type: command
inputs:
  name: {{type: string}}
  tag: {{type: string, optional: true}}
outputs:
  model: {{type: uri_folder}}
command: {command}
distribution: {{type: pytorch}}
"""


ECHO = "#!/bin/sh\nprintf '%s\\0' \"${0##*/}\" \"$@\"\n"  # its name, each argument, NUL-terminated


@pytest.fixture(scope="module")
def bin_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`python` and `t` that print their arguments: what the program of a template would get."""
    folder = tmp_path_factory.mktemp("bin")
    for name in ("python", "t"):
        (folder / name).write_text(ECHO)
        (folder / name).chmod(stat.S_IRWXU)
    return folder


def execute(argv: list[str], env: dict[str, str] | None = None) -> list[str]:
    """Run ``argv`` as a rank runs it; the program's name and the arguments it received."""
    folder = Path(os.environ["DISTCOMP_TEST_BIN"])
    run_env = {"PATH": f"{folder}:/usr/bin:/bin", **(env or {})}
    proc = subprocess.run(argv, capture_output=True, env=run_env, check=True, cwd=folder)
    return proc.stdout.decode().split("\0")[:-1]


@pytest.fixture(autouse=True)
def _on_path(bin_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DISTCOMP_TEST_BIN", str(bin_dir))


def render_v1(command: str, given: dict[str, str], env: dict[str, str] | None = None) -> list[str]:
    spec = loads(V1.format(command=command))
    return execute(spec.render(bind_inputs(spec, given, Path("/base")), {"model": "/out/model"}), env)


def render_v2(command: str, given: dict[str, str], env: dict[str, str] | None = None) -> list[str]:
    spec = loads(V2.format(command=command))
    return execute(spec.render(bind_inputs(spec, given), {"model": "/out/model"}), env)


def line_v2(command: str, given: dict[str, str], env: dict[str, str] | None = None) -> str:
    spec = loads(V2.format(command=command))
    return spec.shell_line(bind_inputs(spec, given), {"model": "/out/model"}, env)


INJECTIONS = ["a b; rm -rf /", "$(touch /tmp/pwned)", "`id`", "x && y", "'quoted'", '"double"',
              "line1\nline2", "", " ", "--flag=1 --other", "$HOME", "{inputs.tag}", "${{inputs.tag}}", "[x]"]


@pytest.mark.parametrize("value", INJECTIONS)
def test_v1_value_stays_one_argument(value: str) -> None:
    assert render_v1("'python train.py --name {inputs.name}'", {"name": value}) == [
        "python", "train.py", "--name", value]


@pytest.mark.parametrize("value", INJECTIONS)
def test_v2_value_stays_one_argument(value: str) -> None:
    assert render_v2("'python train.py --name ${{inputs.name}} --out=${{outputs.model}}'", {"name": value}) == [
        "python", "train.py", "--name", value, "--out=/out/model"]


def test_value_glued_to_text_stays_in_its_word() -> None:
    assert render_v1("'python t.py --name={inputs.name}:{inputs.n}'", {"name": "a b"}) == [
        "python", "t.py", "--name=a b:3"]


def test_optional_block_vanishes_when_unset_and_stays_when_set() -> None:
    cmd = "'python t.py --name {inputs.name} [--tag {inputs.tag}] --model {outputs.model}'"
    assert render_v1(cmd, {"name": "n"}) == ["python", "t.py", "--name", "n", "--model", "/out/model"]
    assert render_v1(cmd, {"name": "n", "tag": "v 1"}) == [
        "python", "t.py", "--name", "n", "--tag", "v 1", "--model", "/out/model"]
    cmd2 = "'python t.py $[[--tag ${{inputs.tag}}]] --name ${{inputs.name}}'"
    assert render_v2(cmd2, {"name": "n"}) == ["python", "t.py", "--name", "n"]
    assert render_v2(cmd2, {"name": "n", "tag": ""}) == ["python", "t.py", "--tag", "", "--name", "n"]


def test_v1_brackets_inside_quotes_are_literal() -> None:
    assert render_v1("""'python -c "print([1, 2])" {inputs.name}'""", {"name": "x"}) == [
        "python", "-c", "print([1, 2])", "x"]


def test_v2_single_brackets_are_literal() -> None:
    assert render_v2("'python t.py [1] ${{inputs.name}}'", {"name": "x"}) == ["python", "t.py", "[1]", "x"]


def test_booleans_numbers_and_paths_render_like_azure() -> None:
    assert render_v1("'t {inputs.flag} {inputs.n} {inputs.lr} {inputs.name}'", {"name": "s", "flag": "false"}) == [
        "t", "False", "3", "1e-05", "s"]
    assert render_v1("'t [{inputs.data}] {inputs.name}'", {"name": "s", "data": "rel/dir"}) == ["t", "/base/rel/dir", "s"]
    assert (render_value(True), render_value(0.2), render_value(10), render_value(Path("/x"))) == ("True", "0.2", "10", "/x")


def test_env_references_are_the_rank_shells() -> None:
    cmd = """'python t.py --rank $RANK --host "${MASTER_ADDR}:$MASTER_PORT" --name {inputs.name}'"""
    env = {"RANK": "1", "MASTER_ADDR": "a b", "MASTER_PORT": "29500"}
    assert render_v1(cmd, {"name": "x"}, env) == ["python", "t.py", "--rank", "1", "--host", "a b:29500", "--name", "x"]
    # unquoted, an expansion is split as the shell splits it: the author's line, the shell's rules
    assert render_v1("'t $MASTER_ADDR {inputs.name}'", {"name": "x"}, env) == ["t", "a", "b", "x"]


def test_unset_env_follows_shell_rules() -> None:
    assert render_v1("""'t $UNSET "$UNSET" end'""", {"name": "x"}, {}) == ["t", "", "end"]
    assert render_v1(r"""'t \$RANK 50% {inputs.name}'""", {"name": "x"}, {"RANK": "0"}) == ["t", "$RANK", "50%", "x"]


def test_single_quotes_keep_dollar_literal() -> None:
    assert render_v1('''"t '$RANK' {inputs.name}"''', {"name": "x"}, {"RANK": "0"}) == ["t", "$RANK", "x"]


def test_values_are_not_env_expanded() -> None:
    assert render_v1("'t {inputs.name}'", {"name": "$RANK"}, {"RANK": "0"}) == ["t", "$RANK"]
    assert render_v1("'t $RANK {inputs.name}'", {"name": "$(echo pwned) `id` $RANK"}, {"RANK": "0"}) == [
        "t", "0", "$(echo pwned) `id` $RANK"]


@pytest.mark.parametrize("value", INJECTIONS)
def test_a_value_in_a_shell_line_stays_one_word_in_every_quoting(value: str) -> None:
    """Unquoted, inside "...", inside '...': the value closes and reopens the author's quote."""
    cmd = """cd . && python t.py ${{inputs.name}} "in ${{inputs.name}} dq" 'in ${{inputs.name}} sq' $RANK"""
    assert render_v2(json.dumps(cmd), {"name": value}, {"RANK": "2"}) == [
        "python", "t.py", value, f"in {value} dq", f"in {value} sq", "2"]


def test_public_style_commands_run_through_the_shell() -> None:
    cmd = 'cd /tmp && pwd >/dev/null && python t.py --global_rank $RANK --tf "$TF_CONFIG" --n ${{inputs.name}}'
    tf = '{"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": 0}}'
    assert render_v2(json.dumps(cmd), {"name": "n 1"}, {"RANK": "3", "TF_CONFIG": tf}) == [
        "python", "t.py", "--global_rank", "3", "--tf", tf, "--n", "n 1"]


def test_render_shows_the_line_the_shell_gets() -> None:
    cmd = "'cd src && python t.py --rank $RANK --name ${{inputs.name}} $[[--tag ${{inputs.tag}}]]'"
    assert line_v2(cmd, {"name": "a b; rm -rf /"}) == "cd src && python t.py --rank $RANK --name 'a b; rm -rf /'"
    assert line_v2(cmd, {"name": "x", "tag": "it's"}, {"RANK": "0"}) == \
        "cd src && python t.py --rank 0 --name x --tag 'it'\"'\"'s'"


@pytest.mark.parametrize("command, shell", [
    ("python t.py --x ${{inputs.name}}", False), ("python 't&&u' \"a|b\" --x=1", False),
    ("python t.py \\\n --x 1\n", False), ("cd src && python t.py", True), ("python t.py $RANK", True),
    ("python t.py > log", True), ("FOO=1 python t.py", True), ("python *.py", True), ("export A=1; t", True),
    ("python t.py\npython u.py", True), ('python "$HOME"', True)])
def test_only_a_line_that_uses_the_shell_runs_one(command: str, shell: bool) -> None:
    """A line without shell syntax is exec'd as its words: the same argv, one process fewer."""
    template, _ = parse(command, "v2")
    assert template.needs_shell is shell


def test_parse_reports_structure_without_raising() -> None:
    _, issues = parse('python "unclosed', "v1")
    assert [i.message for i in issues] == ['unclosed " quote']
    _, issues = parse("python ${{inputs.x", "v2")
    assert [i.message for i in issues] == ["unclosed '${{': the expression is never closed"]
    _, issues = parse("python ${{parent.inputs.x}}", "v2")
    assert [i.message for i in issues] == ["unsupported expression '${{parent.inputs.x}}'"]
    _, issues = parse("cd src && python t.py | tee log", "v1")
    assert issues == []  # the author's shell line: operators are the shell's, not a mistake


def test_bind_inputs_reports_every_problem() -> None:
    spec = loads(V1.format(command="'t {inputs.name} {inputs.n} {inputs.flag} {inputs.lr}'"))
    with pytest.raises(InputError) as info:
        bind_inputs(spec, {"n": "three", "flag": "maybe", "lr": "fast", "nmae": "x"})
    assert str(info.value).splitlines() == [
        "unknown input 'nmae' (expected one of: name, tag, flag, n, lr, data); did you mean 'name'?",
        "missing required input 'name' (give it with --input name=VALUE)",
        "input 'flag' must be true or false, got 'maybe'",
        "input 'n' must be an integer, got 'three'",
        "input 'lr' must be a finite number, got 'fast'",
    ]


def test_bind_inputs_checks_enum_and_range() -> None:
    spec = loads("""
name: t
type: DistributedComponent
inputs:
  opt: {type: Enum, enum: [sgd, adam], default: sgd}
  n: {type: Integer, min: 1, max: 8, default: 2}
launcher: {type: mpi, additional_arguments: 't {inputs.opt} {inputs.n}'}
""")
    assert bind_inputs(spec, {"opt": "adam", "n": "8"}) == {"opt": "adam", "n": 8}
    with pytest.raises(InputError, match=r"^input 'opt' must be one of: adam, sgd; got 'adamw'$"):
        bind_inputs(spec, {"opt": "adamw"})
    with pytest.raises(InputError, match=r"^input 'n' must be <= 8, got 9$"):
        bind_inputs(spec, {"n": "9"})


def test_a_v1_line_in_azure_syntax_keeps_the_authors_shell() -> None:
    template, _ = parse("cd src && python t.py --x {inputs.x} [--t '{inputs.tag}'] --r $RANK | tee log", "v1")
    assert template.as_v2() == "cd src && python t.py --x ${{inputs.x}} $[[--t '${{inputs.tag}}']] --r $RANK | tee log"
    again, issues = parse(template.as_v2(), "v2")
    assert issues == []
    for values in ({"x": "a b"}, {"x": "1", "tag": "t'"}):  # the same template, in Azure's spelling
        assert again.shell_line(lambda r: values.get(r.name)) == template.shell_line(lambda r: values.get(r.name))
