"""YAML reading: positions, and hostile documents that must become located errors."""

from pathlib import Path

import pytest
import yaml

from distcomp.spec import _source, check_text
from distcomp.spec._source import MAX_DEPTH, parse


def errors(text: str) -> list[str]:
    return [str(d) for d in check_text(text, "s.yaml", Path(".")).diagnostics]


def test_positions_of_keys_and_values() -> None:
    doc, diags = parse("a:\n  b: [1, {c: 2}]\n", "s.yaml")
    assert diags == [] and doc.data == {"a": {"b": [1, {"c": 2}]}}
    assert doc.keys[("a", "b")] == (2, 3) and doc.values[("a", "b", 1, "c")] == (2, 14)
    assert doc.locate(("a", "b", 5, "zz")) == (2, 6)  # falls back to the nearest existing part


def test_keys_stay_as_written() -> None:
    doc, _ = parse("on: 1\n1: x\nnull: y\n", "s.yaml")
    assert doc.data == {"on": 1, "1": "x", "null": "y"}


TOO_DEEP = f"the document is nested too deeply (more than {MAX_DEPTH} levels)"


# Both loaders: libyaml (PyYAML >= 6.0.4 has its own 1000-level limit, hit while scanning ahead)
# and the pure-Python one, so the message holds whichever PyYAML build a user has.
@pytest.fixture(params=["libyaml", "python"])
def loader(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "python":
        monkeypatch.setattr(_source, "_Base", yaml.SafeLoader)
    return str(request.param)


def test_deep_nesting_is_an_error_not_a_crash(loader: str) -> None:
    n = 100_000
    assert errors("[" * n + "]" * n) == [f"s.yaml:1:{MAX_DEPTH + 1}: <document>: {TOO_DEEP}"]


def test_deep_block_nesting_is_located(loader: str) -> None:
    text = "".join(" " * i + f"k{i}:\n" for i in range(1500)) + " " * 1500 + "v: 1\n"
    # the mapping at depth MAX_DEPTH + 1 starts at the key on line MAX_DEPTH + 1
    assert errors(text) == [f"s.yaml:{MAX_DEPTH + 1}:{MAX_DEPTH + 1}: <document>: {TOO_DEEP}"]


def test_deep_nesting_after_a_long_line(loader: str) -> None:
    pad = "x: " + "a" * 2000 + "\n"
    # depth 1 is the top mapping, so '[' number MAX_DEPTH (column 3 + MAX_DEPTH) goes too deep
    assert errors(pad + "y: " + "[" * 5000 + "]" * 5000 + "\n") == [
        f"s.yaml:2:{3 + MAX_DEPTH}: <document>: {TOO_DEEP}"]


def test_syntax_error_in_a_deep_document_is_still_a_syntax_error(loader: str) -> None:
    out = errors("a: [[[[1, 2]]\nb: c\n")
    assert len(out) == 1 and out[0].startswith("s.yaml:") and "YAML syntax error" in out[0]


def test_recursive_alias() -> None:
    assert errors("a: &x [*x]\n") == ["s.yaml:1:4: a[0]: an alias refers to itself (recursive YAML)"]


def test_alias_bomb_is_bounded() -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [*a{i-1}, *a{i-1}, *a{i-1}, *a{i-1}, *a{i-1}, *a{i-1}, *a{i-1}, *a{i-1}, *a{i-1}, *a{i-1}]"
              for i in range(1, 9)]
    out = errors("\n".join(lines) + "\n")
    assert len(out) == 1 and "document is too large" in out[0]


def test_merge_keys_resolve() -> None:
    doc, diags = parse("base: &b {x: 1}\nchild:\n  <<: *b\n  y: 2\n", "s.yaml")
    assert diags == [] and doc.data["child"] == {"x": 1, "y": 2}


def test_complex_key_and_lone_surrogate() -> None:
    assert errors("? [a]\n: b\n") == ["s.yaml:1:3: <document>: a key must be a plain name, not a list or mapping"]
    assert errors("name: \ud800") == [
        "s.yaml:1:7: <document>: the text is not valid Unicode (surrogates not allowed)"]
