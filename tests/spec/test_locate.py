"""Where a command's problems are reported, in specs with thousands of references: each
reference is found once, in order, in the raw lines of a folded command (the speed of this
is in benchmarks/validate.py)."""

import re
from pathlib import Path

import pytest

from distcomp.spec import check_text, loads, parse_value
from distcomp.spec._template import Text, parse

N = 3000


def many_inputs(undeclared: set[int]) -> tuple[str, list[tuple[int, int]]]:
    """A spec whose folded command references N inputs, 10 per line, each twice; the
    references in ``undeclared`` name no input. Also where each of those is written."""
    lines = ["name: many", "type: DistributedComponent", "inputs:"]
    lines += [f"  in{i}: {{type: Integer, default: {i}}}" for i in range(N) if i not in undeclared]
    lines += ["launcher:", "  type: mpi", "  additional_arguments: >-", "    python train.py"]
    where = []
    for first in range(0, N, 10):
        words = []
        for i in range(first, first + 10):
            for _ in range(2):  # the same reference twice: each is found in turn
                col = len("    " + " ".join(words) + (" " if words else "")) + len("--x ") + 1
                if i in undeclared:
                    where.append((len(lines) + 1, col))
                words.append(f"--x {{inputs.in{i}}}")
        lines.append("    " + " ".join(words))
    return "\n".join(lines) + "\n", where


def test_every_reference_is_located_in_order_among_thousands() -> None:
    undeclared = {7, 1234, 2999}
    text, where = many_inputs(undeclared)
    found = [(d.line, d.col) for d in check_text(text, "s.yaml", Path(".")).diagnostics]
    assert found == where and len(found) == 6


def test_a_valid_spec_with_thousands_of_inputs_loads() -> None:
    spec = loads(many_inputs(set())[0])
    assert len(spec.inputs) == N and spec.render({n: i.default for n, i in spec.inputs.items()}, {})[-1] == str(N - 1)


def test_a_long_literal_word_is_one_text() -> None:
    word = "x" * 300_000
    template, issues = parse(f"python '{word}' {word}y", "v1")
    assert issues == [] and template.render(lambda ref: None) == ["python", word, word + "y"]
    assert [i for i in template.items if isinstance(i, Text)] == [Text("python"), Text(word), Text(word + "y")]


def test_a_value_that_exec_cannot_pass_is_refused_when_given() -> None:
    spec = loads("name: v\ntype: DistributedComponent\ninputs: {msg: {type: String}, data: {type: AnyDirectory}}\n"
                 "launcher: {type: mpi, additional_arguments: 'python -c pass'}\n")
    for name, value, why in (("msg", "a\0b", "holds a NUL byte (\\0)"), ("data", "/x\0", "holds a NUL byte (\\0)"),
                             ("msg", "z" * 131_072, "is 131072 bytes, over Linux's limit of 131071 bytes")):
        with pytest.raises(ValueError, match="^" + re.escape(f"input '{name}': the value {why}")):
            parse_value(spec.inputs[name], value)
    assert parse_value(spec.inputs["msg"], "z" * 131_071) == "z" * 131_071  # the limit counts the NUL exec adds
