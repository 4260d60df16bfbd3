"""Property-based fuzzing of the spec loader and the command renderer.

The claim under test: whatever text is loaded, the only outcomes are a valid ComponentSpec
or located spec errors -- never any other exception. For a valid spec, binding input values
and rendering the command either works or raises InputError; and a value substituted into
the command is always exactly one argv element (no shell-style re-splitting).

Inputs come from four sources:

* random YAML documents (nested data of every YAML type, keys that collide with real spec
  keys, and "spec-shaped" documents that often pass validation), dumped with yaml.safe_dump;
* random raw text: YAML punctuation, anchors/aliases, merge keys, tags, very deep nesting,
  and lone surrogates;
* random structural mutations of every valid spec in the corpus (and the peer specs), plus
  text-level splices into their YAML;
* random command-line values for every input of each resulting valid spec.

A small dictionary of "interesting" strings (paths with '~user', over-long path components,
NUL, numbers with hundreds of digits, URIs...) is mixed into every string strategy, as a
fuzzer's dictionary would be.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from distcomp.spec import (ComponentSpec, Diagnostic, InputError, SpecError, bind_inputs, check_file, check_text,
                           load, loads)

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
VALID_DIRS = [HERE / "corpus" / "valid", ROOT / "tests" / "reference" / "peer-specs"]
VALID_FILES = sorted({p.resolve() for d in VALID_DIRS if d.is_dir() for p in (*d.glob("*.yaml"), *d.glob("*.yml"))})
CORPUS = [(p, p.read_text(encoding="utf-8")) for p in VALID_FILES]

FUZZ = settings(
    max_examples=300,
    deadline=None,
    database=None,  # no .hypothesis/ folder in the checkout
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much,
                           HealthCheck.large_base_example],
)

# ---------------------------------------------------------------------------------------------
# Vocabulary
# ---------------------------------------------------------------------------------------------

SPEC_KEYS = [
    "name", "type", "inputs", "outputs", "launcher", "command", "distribution", "distributed", "resources", "code",
    "environment", "environment_variables", "version", "display_name", "description", "tags", "$schema",
    "is_deterministic", "successful_return_code", "additional_arguments", "node_count", "process_count_per_node",
    "worker_count", "parameter_server_count", "instance_count", "process_count_per_instance", "default", "optional",
    "enum", "min", "max", "path", "value", "mode", "mpi", "pytorch", "tensorflow", "worker",
    "parameter_server", "count", "slots_per", "compute", "docker", "image", "conda", "conda_file",
    "conda_dependencies", "resource_limits", "<<", "null", "true", "1", "",
]
TYPE_WORDS = [
    "DistributedComponent", "distributedcomponent", "command", "CommandComponent", "String", "Integer", "Float",
    "Boolean", "Enum", "string", "integer", "number", "boolean", "enum", "double", "path", "AnyDirectory",
    "AnyFile", "ModelDirectory", "CsvFile", "uri_folder", "uri_file", "mltable", "mlflow_model", "pytorch", "mpi",
    "tensorflow", "torch.distributed", "tensorflow.distributed", "deepspeed", "horovod", "tf", "openmpi", "PyTorch",
    " mpi ", "Zero", "ZeroOrGreater", "Linux", "azureml:AzureML-Minimal:1", "azureml:env@latest", ".", "src",
]
INTERESTING = [
    "", " ", "\t", "\n", "~", "~/x", "~nosuchuser_distcomp", "~nosuchuser_distcomp/data", "a" * 300,
    "/".join(["d" * 120] * 4), "/proc/1/root/x", "\x00", "a\x00b", "9" * 400, "-" + "9" * 400, "1" + "0" * 5000,
    "1e999", "-1e999", "nan", "NaN", "inf", "-inf", "0x10", "1_000", "\u0663", "\uff11", " 7 ", "+3", "-0", "1.",
    ".5", "true", "yes", "on", "off", "null", "~", "azureml://datastores/x/paths/y", "https://example.com/x",
    "git+https://x/y", "azureml:", "..", "../..", "/", "//", ".\\x", "C:\\x", "$HOME", "${HOME}", "$(id)", "`id`",
    "{inputs.x}", "${{inputs.x}}", "[", "]", "$[[", "]]", "'", '"', "\\", "&&", "||", "|", ";", ">", "2>&1", "&",
    "\u2028", "\u0085", "\ufeff", "\u200b", "\U0001f600", "\x7f", "\x1b[31m",
]

# ---------------------------------------------------------------------------------------------
# Strategies
# ---------------------------------------------------------------------------------------------

# the strings most likely to break a path or number conversion get a branch of their own
# ('/proc/1/root/x' is unreadable in most containers, even for root: stat() gives EACCES)
EDGE = ["~nosuchuser_distcomp", "~nosuchuser_distcomp/x", "a" * 300, "/".join(["d" * 120] * 4), "/proc/1/root/x",
        "\x00", "a\x00b", "", "9" * 400, "-" + "9" * 400, "nan", "inf", "1e999", "..", "/"]
texts = st.one_of(st.text(max_size=40), st.sampled_from(INTERESTING), st.sampled_from(TYPE_WORDS), st.sampled_from(EDGE))
scalars = st.one_of(
    st.none(), st.booleans(),
    st.integers(), st.integers(min_value=-10**30, max_value=10**30), st.sampled_from([0, -1, 1, 2, 2**63, -2**64]),
    st.floats(allow_nan=True, allow_infinity=True),
    texts,
)
keys = st.one_of(st.sampled_from(SPEC_KEYS), st.text(max_size=12), st.integers(), st.booleans(), st.none(),
                 st.floats(allow_nan=False))
yaml_data = st.recursive(
    scalars,
    lambda children: st.one_of(st.lists(children, max_size=5), st.dictionaries(keys, children, max_size=6)),
    max_leaves=40,
)

TEMPLATE_TOKENS = [
    "python", "train.py", "--x", " ", "  ", "\n", "\t", "{inputs.", "{outputs.", "{", "}", "{inputs.x}",
    "{outputs.model}", "{inptus.x}", "{inputs.}", "{inputs.a b}", "[", "]", "${{", "}}", "${{inputs.x}}",
    "${{ inputs.x }}", "${{outputs.model}}", "${{inputs.}}", "${{1+1}}", "$[[", "]]", "$[", "'", '"', "\\", "\\\n",
    "$", "$VAR", "${VAR}", "$1", "${", "&&", "|", ";", ">", "2>&1", "=", "-", "~",
]


def template_text(names: list[str] = ()) -> st.SearchStrategy[str]:
    """Random command text full of reference, block and quoting syntax of both dialects."""
    tokens = list(TEMPLATE_TOKENS)
    for n in names:
        tokens += [f"{{inputs.{n}}}", f"${{{{inputs.{n}}}}}", f"{{outputs.{n}}}", f"${{{{outputs.{n}}}}}", n]
    return st.lists(st.one_of(st.sampled_from(tokens), st.text(max_size=4)), max_size=25).map("".join)


input_names = st.sampled_from(["x", "epochs", "lr", "data", "model", "name", "tag", "a_b", "_", "1bad", "in put"])


@st.composite
def input_decl(draw: st.DrawFn) -> Any:
    if draw(st.integers(0, 4)) == 0:
        return draw(scalars)  # a job's literal value
    decl: dict[Any, Any] = {"type": draw(st.one_of(st.sampled_from(TYPE_WORDS), scalars))}
    for key, strat in (("default", scalars), ("optional", st.one_of(st.booleans(), scalars)),
                       ("min", scalars), ("max", scalars), ("enum", st.lists(scalars, max_size=3)),
                       ("description", texts), ("value", scalars), ("path", texts)):
        if draw(st.integers(0, 3)) == 0:
            decl[key] = draw(strat)
    return decl


counts = st.one_of(st.integers(-2, 8), scalars)


@st.composite
def spec_like(draw: st.DrawFn) -> dict[Any, Any]:
    """A document shaped like one of the three dialects, so that many pass validation."""
    dialect = draw(st.sampled_from(["sdk", "v2", "draft"]))
    names = draw(st.lists(input_names, max_size=4, unique=True))
    doc: dict[Any, Any] = {}
    if draw(st.booleans()):
        doc["name"] = draw(st.one_of(st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._-]{0,20}", fullmatch=True), scalars))
    if draw(st.integers(0, 2)) == 0:
        doc["inputs"] = {n: draw(input_decl()) for n in names}
    if draw(st.integers(0, 3)) == 0:
        doc["outputs"] = {draw(input_names): {"type": draw(st.sampled_from(TYPE_WORDS))}}
    command = draw(template_text(names + ["model"]))
    if dialect == "sdk":
        doc["type"] = draw(st.sampled_from(["DistributedComponent", "distributedComponent", "component", "command"]))
        launcher: dict[str, Any] = {"type": draw(st.one_of(st.sampled_from(TYPE_WORDS), scalars)),
                                    "additional_arguments": command}
        for key in ("node_count", "process_count_per_node", "worker_count", "parameter_server_count"):
            if draw(st.integers(0, 3)) == 0:
                launcher[key] = draw(counts)
        doc["launcher"] = launcher
    elif dialect == "v2":
        if draw(st.booleans()):
            doc["type"] = draw(st.sampled_from(["command", "Command", "pipeline"]))
        doc["command"] = command
        dist: dict[str, Any] = {"type": draw(st.one_of(st.sampled_from(TYPE_WORDS), scalars))}
        for key in ("process_count_per_instance", "worker_count", "parameter_server_count"):
            if draw(st.integers(0, 2)) == 0:
                dist[key] = draw(counts)
        if draw(st.integers(0, 5)):
            doc["distribution"] = dist
        if draw(st.booleans()):
            doc["resources"] = {"instance_count": draw(counts)}
    else:
        doc["command"] = command
        role = {"count": draw(counts)}
        if draw(st.booleans()):
            role["slots_per"] = draw(counts)
        frameworks = draw(st.lists(st.sampled_from(["mpi", "pytorch", "tensorflow", "tf", "pytroch"]),
                                   min_size=0, max_size=2, unique=True))
        doc["distributed"] = {fw: {draw(st.sampled_from(["worker", "parameter_server", "chief"])): role}
                              for fw in frameworks}
        if draw(st.booleans()):
            doc["compute"] = {"instance_count": draw(counts)}
    for key in ("code", "environment", "environment_variables", "tags", "version"):
        if draw(st.integers(0, 4)) == 0:
            doc[key] = draw(st.one_of(st.sampled_from(EDGE), yaml_data))
    if draw(st.integers(0, 4)) == 0:
        doc[draw(keys)] = draw(yaml_data)
    return doc


YAML_TOKENS = [
    "name", "type", "inputs", "launcher", "command", "distribution", "distributed", "code", ": ", ":", "- ", "-",
    "? ", ",", "{", "}", "[", "]", "&a ", "&b ", "*a", "*b", "*undefined", "<<: *a", "<<: [*a, *b]", "<<: ",
    "&a [*a]", "&a {x: *a}", "!!binary ", "!!str ", "!!int ", "!!float ", "!!bool ", "!!null ", "!!timestamp ",
    "!!set ", "!!omap ", "!!python/object/apply:os.system ", "!custom ", "!<tag:x> ", "%YAML 1.1\n", "%TAG ! x\n",
    "---\n", "...\n", "|", "|-", ">", ">+", "#", "'", '"', "\\", "\n", "\n  ", "\n    ", "\t", " ", "@", "`", "%",
    "2001-13-45", "2020-01-01T00:00:00Z", "0o17", "0x1F", "1_0", ".inf", ".nan", "~", "null", "yes", "on",
    "DistributedComponent", "pytorch", "mpi", "{inputs.x}", "${{inputs.x}}", "\ufeff", "\x85", "\u2028",
]
# codec="utf-8": a spec file holds no lone surrogate (write_text could not even write one)
yaml_chars = st.one_of(st.sampled_from(list(":{}[]&*!|>%@`#'\",-?<=~$\\\t\n\r ")), st.characters(codec="utf-8"))
raw_texts = st.one_of(
    st.text(yaml_chars, max_size=200),
    st.lists(st.one_of(st.sampled_from(YAML_TOKENS), st.text(yaml_chars, max_size=3)), max_size=60).map("".join),
)


def deep_doc(shape: str, n: int, key: str = "inputs") -> str:
    """A document nested ``n`` levels deep (or, for "aliases", an alias bomb of ``n`` doublings)."""
    if shape == "flow-list":
        return f"{key}: " + "[" * n + "]" * n
    if shape == "flow-map":
        return f"{key}: " + f"{{{key}: " * n + "1" + "}" * n
    if shape == "block-map":
        return "\n".join(" " * i + f"{key}:" for i in range(n)) + " 1\n"
    if shape == "block-list":
        return "\n".join(" " * (2 * i) + "-" for i in range(n)) + " 1\n"
    if shape == "mixed":
        return "name: x\ntype: DistributedComponent\nlauncher: " + "{additional_arguments: [" * n + "]}" * n
    lines = ["l0: &l0 [x, x]"] + [f"l{i}: &l{i} [*l{i - 1}, *l{i - 1}]" for i in range(1, n)]
    return "\n".join(lines) + "\n"


IN_PROCESS_DEPTH = 5000  # deeper documents are tried in a child process (see test_very_deep_nesting_...)


@st.composite
def deep_text(draw: st.DrawFn) -> str:
    n = draw(st.one_of(st.integers(1, 60), st.integers(300, 1200), st.integers(2000, IN_PROCESS_DEPTH)))
    key = draw(st.sampled_from(["a", "inputs", "launcher", "environment", "conda", "distributed"]))
    shape = draw(st.sampled_from(["flow-list", "flow-map", "block-map", "block-list", "mixed", "aliases"]))
    if shape.startswith("block"):
        n = min(n, 1500)  # the text grows with the square of the depth
    if shape == "aliases":
        n = min(n, 40)
    return deep_doc(shape, n, key)


values = st.one_of(
    st.text(max_size=30), st.sampled_from(INTERESTING), st.sampled_from(EDGE),
    st.integers().map(str), st.floats().map(repr),  # huge numbers: EDGE here, test_numeric_values for more st.sampled_from(["true", "False", "YES", "0", "1", " 1 ", "1.5", "sgd", "adam"]),
)
env_maps = st.one_of(st.none(), st.dictionaries(st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,6}", fullmatch=True),
                                                st.text(max_size=10), max_size=4))
file_names = st.sampled_from(["spec.yaml", "component.yml", "<string>", "dir/sub/job.yml", "weird name:1.yaml",
                              "ünïcode.yaml", "-.yaml", "a" * 300 + ".yaml"])

# ---------------------------------------------------------------------------------------------
# Invariants
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("fuzz")
    (d / "src").mkdir()
    return d


def check_outcome(result: Any, file: str, data: st.DataObject | None = None, base_dir: Path | None = None) -> None:
    """The invariants every LoadResult must satisfy; for a valid spec, exercise bind + render."""
    assert isinstance(result.diagnostics, tuple)
    for d in result.diagnostics:
        assert isinstance(d, Diagnostic)
        assert isinstance(d.line, int) and d.line >= 1, d
        assert isinstance(d.col, int) and d.col >= 1, d
        assert isinstance(d.message, str) and d.message.strip(), d
        assert isinstance(d.path, str) and d.path, d
        assert d.severity in ("error", "warning"), d
        assert str(d).startswith(file + ":"), (str(d), file)
    assert set(result.errors) | set(result.warnings) == set(result.diagnostics)
    valid = result.spec is not None and not result.errors
    invalid = result.spec is None and len(result.errors) >= 1
    assert valid != invalid, (result.spec, result.diagnostics)
    if valid:
        check_spec(result.spec, data, base_dir)


def check_spec(spec: ComponentSpec, data: st.DataObject | None, base_dir: Path | None) -> None:
    assert isinstance(spec, ComponentSpec)
    assert isinstance(spec.name, str) and spec.name
    dist = spec.distribution
    assert isinstance(dist.nodes, int) and not isinstance(dist.nodes, bool) and dist.nodes >= 1
    assert dist.processes_per_node is None or dist.processes_per_node >= 1
    assert isinstance(dist.launcher, str) and dist.launcher
    outputs = {name: f"/out/{name}" for name in spec.outputs}
    try:  # defaults only
        bound = bind_inputs(spec, {}, base_dir)
    except InputError:
        pass
    else:
        argv = spec.render(bound, outputs)
        assert isinstance(argv, list) and all(isinstance(a, str) for a in argv), argv
        for env in (None, {}, {"RANK": "0"}):
            assert isinstance(spec.shell_line(bound, outputs, env), str)
    if data is None:
        return
    given = data.draw(st.fixed_dictionaries({name: values for name in spec.inputs}), label="given")
    if data.draw(st.integers(0, 9), label="extra") == 0:
        given[data.draw(st.text(max_size=8), label="unknown input")] = data.draw(values)
    env = data.draw(env_maps, label="env")
    try:
        bound = bind_inputs(spec, given, base_dir)
    except InputError:
        return
    argv = spec.render(bound, outputs)
    assert isinstance(argv, list) and all(isinstance(a, str) for a in argv), argv
    assert isinstance(spec.shell_line(bound, outputs, env), str)


def dump(data: st.DataObject, doc: Any) -> str:
    return yaml.safe_dump(doc, sort_keys=False, allow_unicode=data.draw(st.booleans(), label="unicode"),
                          default_flow_style=data.draw(st.sampled_from([False, None, True]), label="flow"),
                          width=data.draw(st.sampled_from([80, 12, 10**6]), label="width"))


# ---------------------------------------------------------------------------------------------
# 1. Random YAML documents and random text
# ---------------------------------------------------------------------------------------------


@pytest.mark.slow
@FUZZ
@given(doc=st.one_of(yaml_data, st.dictionaries(st.sampled_from(SPEC_KEYS), yaml_data, max_size=8)),
       data=st.data())
def test_random_yaml_documents(base: Path, doc: Any, data: st.DataObject) -> None:
    text = dump(data, doc)
    file = data.draw(file_names, label="file")
    note(text)
    check_outcome(check_text(text, file, base), file, data, base)


@pytest.mark.slow
@FUZZ
@given(doc=spec_like(), data=st.data())
def test_spec_shaped_documents(base: Path, doc: dict[Any, Any], data: st.DataObject) -> None:
    text = dump(data, doc)
    file = data.draw(file_names, label="file")
    note(text)
    check_outcome(check_text(text, file, base), file, data, base)


@FUZZ
@given(text=raw_texts, file=file_names, data=st.data())
def test_random_text(base: Path, text: str, file: str, data: st.DataObject) -> None:
    check_outcome(check_text(text, file, base), file, data, base)


@pytest.mark.slow
@settings(FUZZ, max_examples=60)
@given(text=deep_text())
def test_deep_nesting_and_alias_bombs(base: Path, text: str) -> None:
    check_outcome(check_text(text, "deep.yaml", base), "deep.yaml")


_CHILD = """
import faulthandler, json, sys
from pathlib import Path
from distcomp.spec import check_text
faulthandler.enable()
for text in json.load(sys.stdin):
    result = check_text(text, "deep.yaml", Path("."))
    assert result.spec is None and result.errors, result
    print(len(text), result.errors[0], flush=True)
"""


@pytest.mark.parametrize("shape", ["flow-list", "flow-map", "mixed"])
def test_very_deep_nesting_is_a_spec_error_not_a_crash(shape: str) -> None:
    """Nesting past the C stack (a ~60 KB file, far below check_file's 4 MB limit) must give a
    diagnostic; it runs in a child process, so that a crash of the YAML parser fails this test
    instead of killing the test session."""
    texts = [deep_doc(shape, n) for n in (10_000, 30_000, 100_000)]
    child = subprocess.run([sys.executable, "-c", _CHILD], input=json.dumps(texts), capture_output=True,
                           text=True, timeout=120)
    assert child.returncode == 0, f"exit status {child.returncode}\n{child.stdout}\n{child.stderr[-3000:]}"


@settings(FUZZ, max_examples=100)
@given(text=st.lists(st.one_of(st.characters(categories=["Cs"]), yaml_chars, st.sampled_from(YAML_TOKENS)),
                     min_size=1, max_size=30).map("".join))  # st.text() never yields surrogates
def test_text_with_lone_surrogates(base: Path, text: str) -> None:
    # A Python str may hold lone surrogates (e.g. from surrogateescape); still a bad spec, not a crash.
    check_outcome(check_text(text, "spec.yaml", base), "spec.yaml")


@settings(FUZZ, max_examples=100)
@given(raw=st.one_of(st.binary(max_size=200), raw_texts.map(lambda t: t.encode("utf-8", "surrogatepass")),
                     st.sampled_from([b"\xef\xbb\xbf", b"\xff\xfe", b"\xef\xbb\xbfname: x\n", b"\x00\x00\x00"])))
def test_check_file_random_bytes(base: Path, raw: bytes) -> None:
    path = base / "bytes.yaml"
    path.write_bytes(raw)
    check_outcome(check_file(path), str(path))
    try:
        load(path)
    except SpecError:
        pass


# ---------------------------------------------------------------------------------------------
# 2. Mutations of the valid corpus
# ---------------------------------------------------------------------------------------------


def test_corpus_is_valid() -> None:
    assert CORPUS, "no valid corpus specs found"
    for path, text in CORPUS:
        result = check_text(text, str(path), path.parent)
        assert result.spec is not None, [str(d) for d in result.errors]
        check_outcome(result, str(path), None, path.parent)


def _paths(node: Any, prefix: tuple[Any, ...] = (), seen: set[int] | None = None) -> list[tuple[Any, ...]]:
    """Every path to a node of ``node`` (cycles from alias mutations are visited once)."""
    seen = set() if seen is None else seen
    out = [prefix]
    if isinstance(node, (dict, list)):
        if id(node) in seen:
            return out
        seen.add(id(node))
        items = node.items() if isinstance(node, dict) else enumerate(node)
        for k, v in list(items):
            out += _paths(v, prefix + (k,), seen)
    return out


def _get(doc: Any, path: tuple[Any, ...]) -> Any:
    for part in path:
        doc = doc[part]
    return doc


COUNT_KEYS = {"node_count", "process_count_per_node", "worker_count", "parameter_server_count", "instance_count",
              "process_count_per_instance", "count", "slots_per"}
PATH_KEYS = {"code", "path", "default", "value", "image", "conda_file", "conda_dependencies_file"}
MUTATIONS = ["delete", "replace", "replace_scalar", "rename", "insert", "input_type", "command", "count", "alias",
             "path_value"]


def mutate(data: st.DataObject, doc: Any) -> Any:
    """One random structural mutation; returns the (possibly new) document."""
    op = data.draw(st.sampled_from(MUTATIONS), label="op")
    paths = _paths(doc)
    inner = [p for p in paths if p]
    dict_paths = [p for p in paths if isinstance(_get(doc, p), dict)]
    if op in ("delete", "rename") and inner:
        path = data.draw(st.sampled_from(inner), label="path")
        parent, last = _get(doc, path[:-1]), path[-1]
        if op == "delete":
            del parent[last]
        elif isinstance(parent, dict):
            new = data.draw(keys, label="new key")
            items = [((new if k == last else k), v) for k, v in parent.items()]
            parent.clear()
            parent.update(items)
        return doc
    if op in ("replace", "replace_scalar"):
        path = data.draw(st.sampled_from(paths), label="path")
        value = data.draw(yaml_data if op == "replace" else scalars, label="value")
        if not path:
            return value
        _get(doc, path[:-1])[path[-1]] = value
        return doc
    if op == "insert" and dict_paths:
        path = data.draw(st.sampled_from(dict_paths), label="path")
        _get(doc, path)[data.draw(keys, label="key")] = data.draw(yaml_data, label="value")
        return doc
    if not isinstance(doc, dict):
        return doc
    if op == "input_type" and isinstance(doc.get("inputs"), dict) and doc["inputs"]:
        name = data.draw(st.sampled_from(sorted(doc["inputs"], key=str)), label="input")
        decl = doc["inputs"][name]
        new_type = data.draw(st.one_of(st.sampled_from(TYPE_WORDS), texts, scalars), label="type")
        if isinstance(decl, dict):
            decl["type"] = new_type
        else:
            doc["inputs"][name] = {"type": new_type, "default": decl}
        return doc
    if op == "command":
        names = [str(k) for section in ("inputs", "outputs") if isinstance(doc.get(section), dict)
                 for k in doc[section]]
        text = data.draw(st.one_of(template_text(names), st.text(max_size=40)), label="command")
        launcher = doc.get("launcher")
        if isinstance(launcher, dict) and "command" not in doc:
            launcher["additional_arguments"] = text
        else:
            doc["command"] = text
        return doc
    if op == "count":
        where = [p for p in inner if p[-1] in COUNT_KEYS]
        if where:
            path = data.draw(st.sampled_from(where), label="path")
            _get(doc, path[:-1])[path[-1]] = data.draw(counts, label="count")
        return doc
    if op == "path_value":
        where = [p for p in inner if p[-1] in PATH_KEYS] + [("code",)]
        path = data.draw(st.sampled_from(where), label="path")
        _get(doc, path[:-1])[path[-1]] = data.draw(st.one_of(st.sampled_from(EDGE), texts), label="path value")
        return doc
    if op == "alias" and inner and dict_paths:
        # the same object in two places: safe_dump writes an anchor and an alias (cycles included)
        src = _get(doc, data.draw(st.sampled_from(paths), label="alias of"))
        target = data.draw(st.sampled_from(dict_paths), label="alias at")
        _get(doc, target)[data.draw(keys, label="alias key")] = src
    return doc


@pytest.mark.slow
@settings(FUZZ, max_examples=400, report_multiple_bugs=False)
@given(data=st.data())
def test_mutated_corpus(data: st.DataObject) -> None:
    path, text = data.draw(st.sampled_from(CORPUS), label="spec")
    doc = copy.deepcopy(yaml.safe_load(text))
    for _ in range(data.draw(st.integers(1, 4), label="mutations")):
        doc = mutate(data, doc)
    out = dump(data, doc)
    note(out)
    file = str(path)
    check_outcome(check_text(out, file, path.parent), file, data, path.parent)


@settings(FUZZ, max_examples=200, report_multiple_bugs=False)
@given(data=st.data())
def test_spliced_corpus_text(data: st.DataObject, base: Path) -> None:
    """Text-level splices keep most of a valid spec and break the YAML in one spot."""
    path, text = data.draw(st.sampled_from(CORPUS), label="spec")
    for _ in range(data.draw(st.integers(1, 3), label="splices")):
        start = data.draw(st.integers(0, len(text)), label="start")
        end = data.draw(st.integers(start, min(len(text), start + 20)), label="end")
        insert = data.draw(st.one_of(st.sampled_from(YAML_TOKENS + TEMPLATE_TOKENS + INTERESTING),
                                     st.text(yaml_chars, max_size=6)), label="insert")
        text = text[:start] + insert + text[end:]
    note(text)
    target = base / path.name
    target.write_text(text, encoding="utf-8")
    result = check_file(target)
    check_outcome(result, str(target), data, target.parent)
    try:
        spec = load(target)
    except SpecError as exc:
        assert result.spec is None and exc.diagnostics == result.errors
    else:
        assert result.spec is not None and (spec.name, spec.command) == (result.spec.name, result.spec.command)
    try:
        loads(text, str(target), target.parent)
    except SpecError:
        assert result.spec is None
    else:
        assert result.spec is not None


CODE_SPECS = {
    "sdk": "name: c\ntype: DistributedComponent\nlauncher: {type: mpi, additional_arguments: python x.py}\n",
    "v2": "type: command\ncommand: python x.py\ndistribution: {type: pytorch}\n",
    "draft": "command: python x.py\ndistributed: {mpi: {worker: {count: 2}}}\n",
}
path_texts = st.one_of(st.sampled_from(EDGE), texts, st.lists(st.sampled_from(["a" * 100, "..", ".", "~", "x", "\x00"]),
                                                                max_size=6).map("/".join))


@settings(FUZZ, max_examples=200)
@given(dialect=st.sampled_from(sorted(CODE_SPECS)), code=st.one_of(path_texts, path_texts.map(lambda p: {"path": p})),
       data=st.data())
def test_code_folder_values(base: Path, dialect: str, code: Any, data: st.DataObject) -> None:
    """``code:`` is resolved on the file system: no path may crash the loader."""
    text = CODE_SPECS[dialect] + yaml.safe_dump({"code": code})
    note(text)
    check_outcome(check_text(text, "code.yaml", base), "code.yaml", data, base)


@settings(FUZZ, max_examples=200)
@given(default=st.one_of(path_texts, scalars), literal=st.booleans(), data=st.data())
def test_port_defaults(base: Path, default: Any, literal: bool, data: st.DataObject) -> None:
    """A port's default is a path resolved when inputs are bound (declared, or a job's literal URI)."""
    decl = default if literal and isinstance(default, str) else {"type": "uri_folder", "default": default}
    doc = {"type": "command", "command": "python x.py --data ${{inputs.data}}", "inputs": {"data": decl},
           "distribution": {"type": "mpi"}}
    text = yaml.safe_dump(doc, sort_keys=False)
    note(text)
    check_outcome(check_text(text, "port.yaml", base), "port.yaml", data, base)


# ---------------------------------------------------------------------------------------------
# 3. Values bound into valid specs (ports, numbers, booleans, enums)
# ---------------------------------------------------------------------------------------------

ALL_TYPES = """\
name: all_types
type: DistributedComponent
inputs:
  s: {type: String}
  i: {type: Integer, min: -5, max: 1000000000}
  f: {type: Float, min: -1.5, max: 1.0e+300}
  b: {type: Boolean}
  e: {type: Enum, enum: [sgd, adam, "1"]}
  p: {type: AnyDirectory}
  q: {type: path, optional: true}
outputs:
  o: {type: AnyDirectory}
launcher:
  type: mpi
  additional_arguments: run {inputs.s} {inputs.i} {inputs.f} {inputs.b} {inputs.e} {inputs.p} [{inputs.q}] {outputs.o}
"""


@pytest.mark.slow
@settings(FUZZ, max_examples=300)
@given(data=st.data())
def test_bind_and_render_all_types(data: st.DataObject, base: Path) -> None:
    result = check_text(ALL_TYPES, "all.yaml", base)
    assert result.spec is not None, [str(d) for d in result.errors]
    check_outcome(result, "all.yaml", data, base)


NUMBERS = """\
name: numbers
type: DistributedComponent
inputs:
  i: {type: Integer, min: -1000000000000, max: 1000000000000}
  f: {type: Float, optional: true}
  g: {type: Float, min: 0, max: 1, optional: true}
launcher: {type: mpi, additional_arguments: "run {inputs.i} [{inputs.f}] [{inputs.g}]"}
"""
numeric_texts = st.one_of(
    st.integers(min_value=-10**400, max_value=10**400).map(str), st.floats().map(repr), st.sampled_from(EDGE),
    st.from_regex(r"\s?[+-]?[0-9]{0,400}(\.[0-9]{0,3})?([eE][+-]?[0-9]{1,4})?\s?", fullmatch=True),
)


@pytest.mark.slow
@settings(FUZZ, max_examples=300)
@given(i=numeric_texts, f=numeric_texts, g=numeric_texts)
def test_numeric_values(i: str, f: str, g: str) -> None:
    """Integer and number inputs take any text: a typed value in range, or InputError."""
    spec = loads(NUMBERS, "numbers.yaml")
    try:
        bound = bind_inputs(spec, {"i": i, "f": f, "g": g})
    except InputError:
        return
    assert isinstance(bound["i"], int) and -10**12 <= bound["i"] <= 10**12
    assert isinstance(bound["f"], (int, float)) and isinstance(bound["g"], (int, float)) and 0 <= bound["g"] <= 1
    argv = spec.render(bound, {})
    assert len(argv) == 4 and argv[0] == "run" and all(isinstance(a, str) for a in argv)


# ---------------------------------------------------------------------------------------------
# 4. Template injection: a value is exactly one argv element, whatever it contains
# ---------------------------------------------------------------------------------------------

INJECT_V1 = """\
name: inject
type: DistributedComponent
inputs:
  name: {type: String}
launcher:
  type: mpi
  additional_arguments: python train.py --name {inputs.name}
"""
INJECT_V2 = """\
type: command
name: inject
inputs:
  name: {type: string}
command: python train.py --name ${{inputs.name}}
distribution: {type: pytorch}
"""
nasty = st.one_of(
    st.text(), st.sampled_from(INTERESTING),
    st.lists(st.sampled_from([" ", ";", "$(id)", "`id`", "'", '"', "\\", "\n", "&&", "||", "|", ">", "$HOME",
                              "${HOME}", "{inputs.name}", "${{inputs.name}}", "[", "]", "$[[", "]]", "*", "~", "#",
                              "a", "rm -rf /", "\t", "\x00", ""]), max_size=12).map("".join),
)


@pytest.mark.parametrize("source", [INJECT_V1, INJECT_V2], ids=["v1", "v2"])
@settings(FUZZ, max_examples=250)
@given(value=nasty, env=st.sampled_from([None, {}, {"HOME": "/home/x", "VAR": "a b"}]))
def test_value_is_one_argv_element(source: str, value: str, env: dict[str, str] | None) -> None:
    spec = loads(source, "inject.yaml")
    if "\x00" in value:  # exec cannot pass it: refused before anything runs
        with pytest.raises(InputError, match=r"input 'name': the value holds a NUL byte"):
            bind_inputs(spec, {"name": value})
        return
    argv = spec.render(bind_inputs(spec, {"name": value}), {})
    assert argv == ["python", "train.py", "--name", value]  # no shell syntax: exec'd as its words


INJECT_SHELL = """\
type: command
name: inject
inputs:
  name: {type: string}
command: >-
  cd / && printf '%s\\0' ${{inputs.name}} "dq ${{inputs.name}} $VAR" 'sq ${{inputs.name}}' $VAR
distribution: {type: pytorch}
"""


@settings(FUZZ, max_examples=150)
@given(value=nasty)
def test_value_is_one_word_of_the_shell_line(value: str) -> None:
    """Through the real /bin/sh: whatever the value holds, the program gets it whole, once per
    place it is used, and the author's own $VAR still expands."""
    if "\x00" in value:
        return
    spec = loads(INJECT_SHELL, "inject.yaml")
    argv = spec.render(bind_inputs(spec, {"name": value}), {})
    assert argv[:2] == ["/bin/sh", "-c"]
    out = subprocess.run(argv, capture_output=True, env={"VAR": "v", "PATH": "/usr/bin:/bin"}, check=True).stdout
    assert out.decode().split("\0")[:-1] == [value, f"dq {value} v", f"sq {value}", "v"]


INJECT_NESTED = """\
type: command
name: inject
inputs:
  name: {type: string}
command: >-
  printf '%s\\0' "${UNSET_X:-${{inputs.name}}}" "$(printf '%s.' ${{inputs.name}})"
  "`printf '%s.' ${{inputs.name}}`" ${UNSET_X:-${{inputs.name}}}
distribution: {type: pytorch}
"""


@settings(FUZZ, max_examples=150)
@given(value=nasty, shell=st.sampled_from(["/bin/sh", "bash"]))
def test_value_is_exact_where_the_shell_parses_again(value: str, shell: str) -> None:
    """Inside "${X:-...}", "$( )", backticks and an unquoted ${X:-...}, through dash and bash:
    the program gets the value exactly (the `.` keeps the trailing newlines $( ) would drop)."""
    if "\x00" in value:
        return
    spec = loads(INJECT_NESTED, "inject.yaml")
    argv = spec.render(bind_inputs(spec, {"name": value}), {})
    assert argv[:2] == ["/bin/sh", "-c"]
    out = subprocess.run([shell, "-c", argv[2]], capture_output=True, env={"PATH": "/usr/bin:/bin"}, check=True).stdout
    assert out.decode().split("\0")[:-1] == [value, f"{value}.", f"{value}.", value]
