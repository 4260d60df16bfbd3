"""Helpers the dialects share to turn checked YAML into records, with the semantic checks
a schema cannot express (defaults vs types, min <= max, template references)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping

from . import _template
from ._diagnostics import DocPath, Problems, did_you_mean, one_of, show
from ._limits import MAX_NAME
from ._model import ComponentSpec, Distribution, EnvironmentSpec, InputSpec, OutputSpec, RoleSpec, frozen_map
from ._paths import SymlinkLoop, resolve
from ._located import Located
from ._types import PARAMETER_TYPES, PORT_TYPES, TENSORFLOW
from ._values import check_default, is_uri


@dataclass
class Context:
    """What a dialect needs while it builds one spec."""

    file: str
    text: str
    doc: Located
    problems: Problems
    base_dir: Path
    launchers: Mapping[str, str]


def as_map(value: Any) -> dict[str, Any]:
    """``value`` if it is a mapping, else {} (the schema already reported it)."""
    return value if isinstance(value, dict) else {}


def as_str(value: Any) -> str | None:
    if isinstance(value, bool) or value is None or isinstance(value, (dict, list)):
        return None
    return str(value)


def as_count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 1 else None


def string_map(value: Any) -> Mapping[str, str]:
    """Environment variables / tags as strings (YAML may type ``8080`` as a number)."""
    out = {}
    for k, v in as_map(value).items():
        if v is None:
            out[k] = ""
        elif isinstance(v, bool):
            out[k] = "true" if v else "false"
        elif not isinstance(v, (dict, list)):
            out[k] = str(v)
    return frozen_map(out)


@dataclass(frozen=True)
class Parts:
    """What every dialect reads the same way: inputs, outputs, command, code folder."""

    inputs: dict[str, InputSpec]
    outputs: dict[str, OutputSpec]
    command: _template.CommandTemplate | None
    code: Path


def read_parts(ctx: Context, data: dict[str, Any], *, dialect: _template.Dialect, command_path: DocPath,
               output_type: str) -> Parts:
    """Inputs (declarations, or a job's literal values), outputs, the checked command, code."""
    raw_inputs, raw_outputs = as_map(data.get("inputs")), as_map(data.get("outputs"))
    inputs: dict[str, InputSpec] = {}
    component = _is_component(data)
    for name, value in raw_inputs.items():
        if isinstance(value, dict) and "type" not in value and dialect == "v2":
            spec = untyped_input(ctx, name, value, ("inputs", name), component)
        else:
            spec = (make_input(ctx, name, value, ("inputs", name)) if isinstance(value, dict)
                    else literal_input(name, value))
        if spec is not None:
            inputs[name] = spec
    outputs = {n: make_output(n, v, output_type) for n, v in raw_outputs.items()}
    for name in set(raw_inputs) & set(raw_outputs):
        ctx.problems.add(("outputs", name), f"'{name}' is both an input and an output", expected="distinct names",
                         at_key=True)
    source: Any = data
    for key in command_path:
        source = as_map(source).get(key)  # type: ignore[call-overload]
    command = parse_command(ctx, source, dialect, command_path, inputs, outputs, raw_inputs)
    return Parts(inputs, outputs, command, make_code(ctx, data.get("code"), ("code",)))


def topology(launcher: str, nodes: int, ppn: int | None, workers: int | None, ps: int,
             roles: tuple[RoleSpec, ...] = ()) -> Distribution:
    """The Distribution; for TensorFlow, nodes x processes per node is the worker count."""
    if launcher == TENSORFLOW:
        workers = workers or nodes * (ppn or 1)
        ppn = ppn or max(1, workers // nodes)
    return Distribution(launcher, nodes, ppn, workers, ps, roles)


def assemble(data: dict[str, Any], parts: Parts, name: str, distribution: Distribution,
             **extra: Any) -> ComponentSpec:
    """The ComponentSpec from the fields all dialects write alike, plus ``extra``."""
    assert parts.command is not None
    deterministic = data.get("is_deterministic")
    return ComponentSpec(
        name=name, command=parts.command, code=parts.code, distribution=distribution,
        version=as_str(data.get("version")), display_name=as_str(data.get("display_name")),
        description=as_str(data.get("description")), tags=string_map(data.get("tags")),
        inputs=frozen_map(parts.inputs), outputs=frozen_map(parts.outputs),
        environment=make_environment(data.get("environment")),
        environment_variables=string_map(data.get("environment_variables")),
        is_deterministic=deterministic if isinstance(deterministic, bool) else None,
        **extra,
    )


def _is_component(data: dict[str, Any]) -> bool:
    """Whether the file says it is a component (its $schema); a job file may leave out an input's type."""
    schema = data.get("$schema")
    return isinstance(schema, str) and schema.lower().endswith("component.schema.json")


def untyped_input(ctx: Context, name: str, raw: dict[str, Any], path: DocPath, component: bool) -> InputSpec | None:
    """A job's input without ``type:``, as azure-ai-ml reads it: ``{value: 3}`` is the literal 3,
    anything else (``{path: ..., mode: ...}``) a ``uri_folder`` (its ``Input``'s default type)."""
    if component:
        ctx.problems.add(path, "missing required key 'type'", expected="type: uri_folder, uri_file, string, ...",
                         hint="a component's input must say its type (only a job's input may leave it out, "
                              "and Azure ML then takes uri_folder)")
        return None
    if "value" in raw:
        others = sorted(k for k in raw if k != "value")
        if others:  # azure-ai-ml's literal input schema has value: and nothing else
            ctx.problems.add(path + (others[0],), f"a literal input ({{value: ...}}) takes no '{others[0]}'",
                             expected="value: alone, or type: with default:", at_key=True,
                             hint="write it as {type: ..., default: ...} to describe it")
            return None
        return literal_input(name, raw["value"])
    return make_input(ctx, name, {**raw, "type": "uri_folder"}, path)


def _port_list(written: list[Any]) -> str | None:
    """``[AnyFile, AnyDirectory]``: the one port type that holds what every listed one holds
    (``path`` takes either), or None if one is not a port type (the schema reported it)."""
    kinds = [w for w in written if isinstance(w, str) and w.lower() in PORT_TYPES]
    if not kinds or len(kinds) != len(written):
        return None
    holds = {PORT_TYPES[k.lower()] for k in kinds}
    return kinds[0] if len(holds) == 1 else "path"


def make_input(ctx: Context, name: str, raw: Any, path: DocPath) -> InputSpec | None:
    """An InputSpec from a declaration ``{type: ..., default: ...}``, checking its values."""
    if not isinstance(raw, dict):
        return None
    written = _port_list(raw["type"]) if isinstance(raw.get("type"), list) else raw.get("type")
    if not isinstance(written, str):
        return None
    low = written.lower()
    optional = raw.get("optional") is True
    description = as_str(raw.get("description"))
    if low in PORT_TYPES:
        spec = InputSpec(name, written, "port", holds=PORT_TYPES[low], description=description,  # type: ignore[arg-type]
                         optional=optional)
        default = raw.get("default", raw.get("path"))
        return _with_default(ctx, spec, default, path + (("default" if "default" in raw else "path"),))
    if low not in PARAMETER_TYPES:
        return None  # reported by the schema
    canonical = PARAMETER_TYPES[low]
    enum = raw.get("enum")
    enum_t = tuple(str(e) for e in enum) if isinstance(enum, list) else None
    if canonical == "enum" and enum_t is not None and not enum_t:
        ctx.problems.add(path + ("enum",), "an enum needs at least one value", expected="a non-empty list", got="[]")
    lo, hi = raw.get("min"), raw.get("max")
    lo = lo if isinstance(lo, (int, float)) and not isinstance(lo, bool) else None
    hi = hi if isinstance(hi, (int, float)) and not isinstance(hi, bool) else None
    if (lo is not None or hi is not None) and canonical not in ("integer", "number"):
        key = "min" if lo is not None else "max"
        ctx.problems.add(path + (key,), f"'{key}' only applies to integer and number inputs",
                         expected="no min/max", got=f"{key} on a {canonical} input")
    if canonical == "integer":
        for key, val in (("min", lo), ("max", hi)):
            if isinstance(val, float):
                ctx.problems.add(path + (key,), f"'{key}' of an integer input must be an integer",
                                 expected="an integer", got=show(val))
    if lo is not None and hi is not None and lo > hi:
        ctx.problems.add(path + ("min",), "min is greater than max", expected="min <= max",
                         got=f"min={show(lo)}, max={show(hi)}")
        lo = hi = None
    spec = InputSpec(name, canonical, "parameter", description=description, optional=optional,
                     enum=enum_t if enum_t else None, min=lo, max=hi)
    value = raw.get("default", raw.get("value"))
    return _with_default(ctx, spec, value, path + (("default" if "default" in raw else "value"),))


def _with_default(ctx: Context, spec: InputSpec, value: Any, path: DocPath) -> InputSpec:
    if value is None:
        return spec
    typed, problem, expected = check_default(spec, value)
    if problem:
        ctx.problems.add(path, problem, expected=expected, got=show(value))
        return spec
    return InputSpec(**{**spec.__dict__, "default": typed})


def literal_input(name: str, value: Any) -> InputSpec | None:
    """A job's ``inputs: {epochs: 1}``: the value declares the type and is the default."""
    if isinstance(value, bool):
        return InputSpec(name, "boolean", "parameter", default=value)
    if isinstance(value, int):
        return InputSpec(name, "integer", "parameter", default=value)
    if isinstance(value, float):
        return InputSpec(name, "number", "parameter", default=value)
    if isinstance(value, str):
        if is_uri(value):
            return InputSpec(name, "uri_folder", "port", holds="folder", default=value)
        return InputSpec(name, "string", "parameter", default=value)
    return None


def default_name(file: str) -> str:
    """A job file has no name: use its file name, made into a valid component name."""
    stem = re.sub(r"[^A-Za-z0-9._-]+", "-", Path(file).stem)[:MAX_NAME].strip("-._")
    return stem or "component"


def make_output(name: str, raw: Any, default_type: str) -> OutputSpec:
    raw = as_map(raw)
    written = raw.get("type") if isinstance(raw.get("type"), str) else default_type
    return OutputSpec(name, written, PORT_TYPES.get(written.lower(), "folder"),  # type: ignore[arg-type]
                      description=as_str(raw.get("description")), path=as_str(raw.get("path")),
                      mode=as_str(raw.get("mode")))


def make_environment(raw: Any) -> EnvironmentSpec | None:
    """Every shape people write: ``azureml:Name:1``, ``file:env.yml``, ``{name: ...}``,
    ``{image: ...}``, ``{build: {path: ...}}``, ``{docker: {image | build: ...}, conda: {...}}``."""
    if isinstance(raw, str):
        name, version = _split_reference(raw)
        return EnvironmentSpec(name=name, version=version, reference=raw)
    if not isinstance(raw, dict):
        return None
    docker = as_map(raw.get("docker"))
    conda = as_map(raw.get("conda"))
    conda_file = raw.get("conda_file") or conda.get("conda_dependencies_file")
    inline = conda.get("conda_dependencies")
    fields: dict[str, Any] = dict(
        name=as_str(raw.get("name")), version=as_str(raw.get("version")),
        image=as_str(raw.get("image")) or as_str(docker.get("image")),
        conda_file=as_str(conda_file) if isinstance(conda_file, str) else None,
        conda=frozen_map(inline if isinstance(inline, dict) else None),
    )
    build = _build_context(as_map(raw.get("build")), as_map(docker.get("build")))
    return EnvironmentSpec(**fields, build=frozen_map(build))


def _build_context(v2: dict[str, Any], v1: dict[str, Any]) -> dict[str, str]:
    """azure-ai-ml's ``build: {path, dockerfile_path}`` from the v2 ``build:`` or the Component
    SDK's ``docker: {build: {dockerfile: file:PATH}}`` (its folder is the context)."""
    if isinstance(v2.get("path"), str):
        out = {"path": v2["path"]}
        if isinstance(v2.get("dockerfile_path"), str):
            out["dockerfile_path"] = v2["dockerfile_path"]
        return out
    dockerfile = v1.get("dockerfile")
    if isinstance(dockerfile, str) and dockerfile.strip():
        local = dockerfile[len("file:"):] if dockerfile.startswith("file:") else dockerfile
        folder, _, base = local.rpartition("/")
        return {"path": folder or ".", "dockerfile_path": base}
    return {}


def _split_reference(ref: str) -> tuple[str | None, str | None]:
    body = ref[len("azureml:"):] if ref.startswith("azureml:") and not ref.startswith("azureml://") else None
    if body is None:
        return None, None
    if "@" in body:
        name, _, label = body.partition("@")
        return name, label
    name, _, version = body.partition(":")
    return name, version or None


def make_code(ctx: Context, raw: Any, path: DocPath) -> Path:
    """The folder the command runs in (default: the spec's folder); missing is a warning."""
    if raw is None:
        return ctx.base_dir
    text = raw if isinstance(raw, str) else as_str(as_map(raw).get("path"))
    where = path if isinstance(raw, str) else path + ("path",)
    if not text:
        return ctx.base_dir
    if is_uri(text):
        ctx.problems.add(where, f"code {show(text)} is not a local folder", expected="a folder path relative to the spec",
                         hint="download the snapshot and point code: at it")
        return ctx.base_dir
    if "\0" in text:
        return ctx.base_dir  # reported where it is written (check_document)
    try:
        folder = resolve(ctx.base_dir / text)
        exists = folder.is_dir()
    except SymlinkLoop:
        ctx.problems.add(where, f"code folder {show(text)} is a symbolic link loop",
                         expected="a folder path relative to the spec", hint="point code: at a real folder")
        return ctx.base_dir
    except (OSError, ValueError) as exc:  # name too long, ...
        ctx.problems.add(where, f"code folder {show(text)} is not a usable path ({getattr(exc, 'strerror', None) or exc})",
                         expected="a folder path relative to the spec")
        return ctx.base_dir
    if not exists:
        ctx.problems.warn(where, f"code folder {show(text)} does not exist (resolved to {folder})",
                          hint="create it before running; compiling does not need it")
    return folder


def parse_command(ctx: Context, source: Any, dialect: _template.Dialect, path: DocPath,
                  inputs: Mapping[str, InputSpec], outputs: Mapping[str, OutputSpec],
                  declared: Iterable[str] = ()) -> _template.CommandTemplate | None:
    """Parse the command and check every reference against the declared inputs/outputs.
    ``declared`` names inputs whose declaration was bad (already reported): no cascade."""
    if not isinstance(source, str):
        return None
    if not source.strip():
        ctx.problems.add(path, "the command is empty", expected="a command such as 'python train.py'")
        return None
    template, issues = _template.parse(source, dialect)
    where = _Locator(ctx.text, ctx.doc.locate(path))
    for issue in issues:
        line, col = where.nth(issue.snippet, issue.occurrence)
        ctx.problems.at(line, col, path, issue.message, hint=issue.hint, severity=issue.severity)
    seen: dict[str, int] = {}
    skip = set(declared) - set(inputs)
    for ref, inside in template.references():
        pool: Mapping[str, Any] = inputs if ref.kind == "inputs" else outputs
        line, col = where.next(ref.source, seen.get(ref.source, 0))
        seen[ref.source] = seen.get(ref.source, 0) + 1
        if ref.kind == "inputs" and ref.name in skip:
            continue
        if ref.name not in pool:
            noun = ref.kind[:-1]
            ctx.problems.at(line, col, path, f"reference to undeclared {noun} '{ref.name}'",
                    expected=one_of(pool) if pool else f"a declared {noun} (none are declared)",
                    hint=did_you_mean(ref.name, pool))
        elif ref.kind == "inputs":
            inp = inputs[ref.name]
            if inp.optional and inp.default is None and not inside:
                opener, closer = ("[", "]") if dialect == "v1" else ("$[[", "]]")
                ctx.problems.at(line, col, path, f"optional input '{ref.name}' is used outside an optional block",
                        expected=f"{opener}... {ref.source}{closer}",
                        hint=f"wrap it in {opener} {closer} so it vanishes when unset, or make the input required")
    return template


class _Locator:
    """Where the command's tokens are written in the file. Folded YAML moves words across lines
    but keeps each token whole and in order, so search the raw lines (split once, not per token:
    that made validate quadratic in the number of references)."""

    def __init__(self, text: str, start: tuple[int, int]) -> None:
        self.lines = text.splitlines()
        self.start = start
        self.cursor = (start[0] - 1, start[1] - 1)  # just after the last token found in order (0-based)
        self.resume: dict[str, tuple[int, int, int]] = {}  # snippet -> (occurrence, line, col) to go on from

    def next(self, snippet: str, occurrence: int) -> tuple[int, int]:
        """The ``occurrence``-th ``snippet``, found after the previous token: tokens come in order."""
        found = self._scan(snippet, *self.cursor)
        if found is None:
            return self.nth(snippet, occurrence)
        self.cursor = (found[0], found[1] + len(snippet))
        return found[0] + 1, found[1] + 1

    def nth(self, snippet: str, occurrence: int) -> tuple[int, int]:
        """The ``occurrence``-th ``snippet`` at or after the command's start; the start if it is not there."""
        done, line, col = self.resume.get(snippet, (0, self.start[0] - 1, self.start[1] - 1))
        if occurrence < done:
            done, line, col = 0, self.start[0] - 1, self.start[1] - 1
        while (found := self._scan(snippet, line, col)) is not None:
            line, col = found[0], found[1] + len(snippet)
            done += 1
            self.resume[snippet] = (done, line, col)
            if done > occurrence:
                return found[0] + 1, found[1] + 1
        return self.start

    def _scan(self, snippet: str, line: int, col: int) -> tuple[int, int] | None:
        """The first ``snippet`` at or after 0-based ``line``, ``col``."""
        if not snippet:
            return None
        for idx in range(line, len(self.lines)):
            at = self.lines[idx].find(snippet, col if idx == line else 0)
            if at >= 0:
                return idx, at
        return None
