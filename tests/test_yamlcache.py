"""Issue 38: a spec's parse, and a function component's YAML text, kept between processes
(``distcomp.base.yamlcache``), so that loading an unchanged spec or exporting an unchanged
function imports no PyYAML; what is kept is exactly what the parser makes, for that very text."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from distcomp.base import yamlcache
from distcomp.spec import _parsecache, _source, check_text

SPEC = """\
name: cached  # a comment
version: 0.1.0
type: DistributedComponent
inputs:
  epochs: &int {type: Integer, default: 3}
  steps: {<<: *int, description: "passes, 'quoted'"}
  ratio: {type: Float, default: .5}
  flag: {type: Boolean, default: yes}
  name: {type: String, default: "on"}
launcher:
  type: pytorch
  process_count_per_node: 2
  additional_arguments: >-
    python train.py --epochs {inputs.epochs}
    --name {inputs.name}
"""

LOAD = """\
import json, sys
from distcomp.spec._parsecache import parse
doc, problems = parse(open(sys.argv[1], encoding="utf-8").read(), sys.argv[1])
print(json.dumps([repr(doc.data), sorted(map(repr, doc.values.items())), sorted(map(repr, doc.keys.items())),
                  [str(p) for p in problems], "yaml" in sys.modules]))
"""


def _env(cache: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", yamlcache.ENV)}
    return {**env, "XDG_CACHE_HOME": str(cache)}


def _load(spec: Path, cache: Path) -> list:  # type: ignore[type-arg]
    proc = subprocess.run([sys.executable, "-c", LOAD, str(spec)], capture_output=True, text=True, timeout=60,
                          env=_env(cache))
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)  # type: ignore[no-any-return]


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(folder))
    monkeypatch.delenv(yamlcache.ENV, raising=False)
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    return folder


def _entries(cache: Path) -> list[Path]:
    return sorted((cache / "distcomp" / "yaml").rglob("*.marshal"))


def test_an_unchanged_spec_is_loaded_again_without_pyyaml_exactly_as_parsed(tmp_path: Path, cache: Path) -> None:
    spec = tmp_path / "component.yaml"
    spec.write_text(SPEC, encoding="utf-8")
    first, second = _load(spec, cache), _load(spec, cache)
    assert first[-1] is True and second[-1] is False  # the second process never imported PyYAML
    assert first[:-1] == second[:-1] and first[3] == []  # the same values, positions and keys, no problem
    doc, _ = _source.parse(SPEC, "x")
    assert first[0] == repr(doc.data) and "'default': 3" in first[0] and "'default': True" in first[0]
    spec.write_text(SPEC.replace("default: 3", "default: 4"), encoding="utf-8")  # an edit: parsed anew
    edited = _load(spec, cache)
    assert edited[-1] is True and "'default': 4" in edited[0]


def test_a_kept_parse_loads_the_same_spec_as_the_parser(tmp_path: Path) -> None:
    direct = check_text(SPEC, "c.yaml", tmp_path)  # parsed, then kept
    assert _entries(Path(os.environ["XDG_CACHE_HOME"])) != []
    cached = check_text(SPEC, "c.yaml", tmp_path)
    assert direct.spec is not None and cached.spec == direct.spec
    assert [str(w) for w in cached.warnings] == [str(w) for w in direct.warnings]


def test_an_entry_answers_only_for_its_own_text(tmp_path: Path, cache: Path) -> None:
    other = SPEC.replace("cached", "forged")
    _parsecache.parse(SPEC, "a.yaml")
    (entry,) = _entries(cache)
    target = Path(yamlcache.entry_file("parse", other.encode()))
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(entry, target)  # another text's answer where this text's would be
    doc, problems = _parsecache.parse(other, "b.yaml")
    assert problems == [] and doc.data["name"] == "forged" and doc.file == "b.yaml"


@pytest.mark.parametrize("content", [b"", b"\x00garbage", b"\xe3\x00\x00\x00"])
def test_a_broken_entry_is_ignored_and_replaced(cache: Path, content: bytes) -> None:
    path = Path(yamlcache.entry_file("parse", SPEC.encode()))
    path.parent.mkdir(parents=True)
    path.write_bytes(content)
    doc, problems = _parsecache.parse(SPEC, "a.yaml")
    assert problems == [] and doc.data["name"] == "cached"
    assert path.read_bytes() != content and _parsecache.parse(SPEC, "a.yaml")[0].data == doc.data


def test_a_problem_is_never_kept_and_always_reported(cache: Path) -> None:
    bad = "name: a\nname: b\n"
    for _ in range(2):
        doc, problems = _parsecache.parse(bad, "bad.yaml")
        assert [(p.line, "duplicate key 'name'" in p.message) for p in problems] == [(2, True)]
    assert _entries(cache) == []


def test_a_value_marshal_cannot_hold_is_parsed_each_time(cache: Path) -> None:
    text = "name: a\nwhen: 2026-11-29 10:00:00\n"  # a YAML timestamp: a datetime
    first, _ = _parsecache.parse(text, "t.yaml")
    second, _ = _parsecache.parse(text, "t.yaml")
    assert first.data == second.data and type(second.data["when"]).__name__ == "datetime"
    assert _entries(cache) == []


def test_a_changed_parser_is_not_answered_from_the_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    parser = tmp_path / "parser.py"
    parser.write_text("# v1\n")
    monkeypatch.setattr(_parsecache, "_PARSER", str(parser))
    _parsecache.parse(SPEC, "a.yaml")
    assert yamlcache.get("parse", SPEC.encode(), yamlcache.key(str(parser))) is not yamlcache.MISS
    parser.write_text("# v2, another parser\n")
    assert yamlcache.get("parse", SPEC.encode(), yamlcache.key(str(parser))) is yamlcache.MISS


def test_nothing_is_written_without_bytecode_nor_read_when_off(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    _parsecache.parse(SPEC, "a.yaml")
    assert _entries(cache) == []
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    _parsecache.parse(SPEC, "a.yaml")
    assert len(_entries(cache)) == 1
    monkeypatch.setenv(yamlcache.ENV, "off")
    assert yamlcache.key() is None and yamlcache.get("parse", SPEC.encode(), None) is yamlcache.MISS


def test_past_the_limit_the_older_half_goes(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(yamlcache, "LIMIT", 4)
    key = yamlcache.key()
    for i in range(5):
        yamlcache.put("parse", f"text {i}".encode(), key, i)
        path = Path(yamlcache.entry_file("parse", f"text {i}".encode()))
        os.utime(path, ns=(i * 10**9, i * 10**9))  # written in this order
    kept = {yamlcache.get("parse", f"text {i}".encode(), key) for i in range(5)}
    assert kept == {yamlcache.MISS, 3, 4}  # the 5th made 5 > 4: down to the newest half (2)


EXPORT = """\
import sys
sys.path.insert(0, sys.argv[1])
import distcomp
from train import train
distcomp.export(train, sys.argv[2])
print("yaml" in sys.modules)
"""


def test_an_unchanged_function_is_exported_again_without_pyyaml(tmp_path: Path, cache: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "train.py").write_text(
        "import distcomp\n\n\n@distcomp.component(name='t', version='1.0.0', nproc_per_node=2)\n"
        "def train(data: distcomp.Input, model: distcomp.Output, epochs: int = 3, lr: float = 0.5, "
        "name: str = 'on', amp: bool = False):\n    pass\n")
    texts, imported = [], []
    for i in range(2):
        proc = subprocess.run([sys.executable, "-c", EXPORT, str(project), str(tmp_path / f"out{i}")],
                              capture_output=True, text=True, timeout=60, env=_env(cache), cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        imported.append(proc.stdout.split()[-1])
        texts.append((tmp_path / f"out{i}" / "component.yaml").read_text())
    assert imported == ["True", "False"] and texts[0] == texts[1]
    assert "default: 'on'" in texts[0] and "default: 0.5" in texts[0]
