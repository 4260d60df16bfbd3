"""Command templates render to argv lists: words first, values never re-split, no shell."""

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


def render_v1(command: str, given: dict[str, str], env: dict[str, str] | None = None) -> list[str]:
    spec = loads(V1.format(command=command))
    return spec.render(bind_inputs(spec, given, Path("/base")), {"model": "/out/model"}, env)


def render_v2(command: str, given: dict[str, str], env: dict[str, str] | None = None) -> list[str]:
    spec = loads(V2.format(command=command))
    return spec.render(bind_inputs(spec, given), {"model": "/out/model"}, env)


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


def test_env_references_fill_late_and_never_split() -> None:
    cmd = "'python t.py --rank $RANK --host ${MASTER_ADDR}:$MASTER_PORT --name {inputs.name}'"
    env = {"RANK": "1", "MASTER_ADDR": "a b", "MASTER_PORT": "29500"}
    assert render_v1(cmd, {"name": "x"}, env) == ["python", "t.py", "--rank", "1", "--host", "a b:29500", "--name", "x"]
    # without an environment (distcomp render) the references are shown, not dropped
    assert render_v1(cmd, {"name": "x"}) == [
        "python", "t.py", "--rank", "${RANK}", "--host", "${MASTER_ADDR}:${MASTER_PORT}", "--name", "x"]


def test_unset_env_follows_shell_rules() -> None:
    assert render_v1("""'t $UNSET "$UNSET" end'""", {"name": "x"}, {}) == ["t", "", "end"]
    assert render_v1(r"""'t \$RANK $$ 50% {inputs.name}'""", {"name": "x"}, {"RANK": "0"}) == ["t", "$RANK", "$$", "50%", "x"]


def test_single_quotes_keep_dollar_literal() -> None:
    assert render_v1('''"t '$RANK' {inputs.name}"''', {"name": "x"}, {"RANK": "0"}) == ["t", "$RANK", "x"]


def test_values_are_not_env_expanded() -> None:
    assert render_v1("'t {inputs.name}'", {"name": "$RANK"}, {"RANK": "0"}) == ["t", "$RANK"]


def test_parse_reports_structure_without_raising() -> None:
    _, issues = parse('python "unclosed', "v1")
    assert [i.message for i in issues] == ['unclosed " quote']
    _, issues = parse("python ${{inputs.x", "v2")
    assert [i.message for i in issues] == ["unclosed '${{': the expression is never closed"]
    _, issues = parse("python ${{parent.inputs.x}}", "v2")
    assert [i.message for i in issues] == ["unsupported expression '${{parent.inputs.x}}'"]
    _, issues = parse("cd src && python t.py | tee log", "v1")
    assert [(i.message, i.severity) for i in issues] == [
        ("shell operator '&&' is passed to the program as a literal argument", "warning"),
        ("shell operator '|' is passed to the program as a literal argument", "warning")]


def test_bind_inputs_reports_every_problem() -> None:
    spec = loads(V1.format(command="'t {inputs.name} {inputs.n} {inputs.flag} {inputs.lr}'"))
    with pytest.raises(InputError) as info:
        bind_inputs(spec, {"n": "three", "flag": "maybe", "lr": "fast", "nmae": "x"})
    assert str(info.value).splitlines() == [
        "unknown input 'nmae' (expected one of: name, tag, flag, n, lr, data); did you mean 'name'?",
        "missing required input 'name' (give it with --input name=VALUE)",
        "input 'flag' is a boolean (expected true or false, got 'maybe')",
        "input 'n' is an integer (expected an integer, got 'three')",
        "input 'lr' is a number (expected a finite number, got 'fast')",
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
    with pytest.raises(InputError, match=r"input 'opt': 'adamw' is not one of the enum values \(expected one of: adam, sgd\)"):
        bind_inputs(spec, {"opt": "adamw"})
    with pytest.raises(InputError, match=r"input 'n': 9 is above the maximum \(expected <= 8\)"):
        bind_inputs(spec, {"n": "9"})
