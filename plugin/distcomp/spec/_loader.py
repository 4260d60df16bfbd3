"""Load a spec file of any dialect into a ComponentSpec, reporting every problem at once."""

from __future__ import annotations

import dataclasses
import gc
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from . import _dialect_draft, _dialect_sdk, _dialect_v2
from ._build import Context
from ._diagnostics import Diagnostic, Problems, SpecError, show
from ._limits import check_document
from ._model import ComponentSpec
from ._schema import Obj
from ._parsecache import parse
from ._types import installed_launchers

MAX_BYTES = 4 * 1024 * 1024  # a spec is a few KB; refuse to parse a stray data file


@dataclass(frozen=True)
class Dialect:
    name: str
    schema: Callable[[Mapping[str, str]], Obj]
    build: Callable[[Context, dict[str, Any]], ComponentSpec | None]


DIALECTS = {
    "sdk": Dialect("Component SDK DistributedComponent", _dialect_sdk.schema, _dialect_sdk.build),
    "v2": Dialect("azure-ai-ml command component/job", _dialect_v2.schema, _dialect_v2.build),
    "draft": Dialect("distributed job draft", _dialect_draft.schema, _dialect_draft.build),
}


@dataclass(frozen=True)
class LoadResult:
    """The spec (None when any error was found) and every diagnostic, errors and warnings."""

    spec: ComponentSpec | None
    diagnostics: tuple[Diagnostic, ...]
    dialect: str | None = None

    @property
    def errors(self) -> tuple[Diagnostic, ...]:
        return tuple(d for d in self.diagnostics if d.severity == "error")

    @property
    def warnings(self) -> tuple[Diagnostic, ...]:
        return tuple(d for d in self.diagnostics if d.severity == "warning")


def detect(data: dict[str, Any]) -> str | None:
    """Which dialect a document is written in, from its keys."""
    kind = data.get("type")
    kind = kind.lower() if isinstance(kind, str) else None
    if kind in ("distributedcomponent", "distributedcomponent@1-legacy") or (kind is None and "launcher" in data):
        return "sdk"
    if "distributed" in data and kind is None:
        return "draft"
    if kind == "command" or (kind is None and ("command" in data or "distribution" in data)):
        return "v2"
    return None


def check_text(text: str, file: str, base_dir: Path,
               launchers: Mapping[str, str] | None = None) -> LoadResult:
    """Load spec ``text``; relative paths in it resolve against ``base_dir``."""
    # Loading makes many objects and frees few until it ends: the cyclic collector would rescan
    # them again and again (a quarter of the time of a spec with 10,000 inputs).
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _check_text(text, file, base_dir, installed_launchers() if launchers is None else launchers)
    finally:
        if enabled:
            gc.enable()


def _check_text(text: str, file: str, base_dir: Path, launchers: Mapping[str, str]) -> LoadResult:
    doc, diags = parse(text, file)
    if diags:
        return LoadResult(None, tuple(diags))
    problems = Problems(file, doc)
    if not isinstance(doc.data, dict):
        problems.add((), "the document is not a mapping", expected="a mapping with name, type, inputs, ...",
                     got=show(doc.data))
        return LoadResult(None, tuple(problems.items))
    key = detect(doc.data)
    if key is None and _is_pipeline(doc.data):
        _pipeline_problem(doc.data, problems)
        return LoadResult(None, tuple(problems.items))
    if key is None:
        kind = doc.data.get("type")
        problems.add(("type",) if "type" in doc.data else (),
                     "not a distributed component" if "type" in doc.data else "cannot tell which dialect this is",
                     expected="type: DistributedComponent with launcher:, type: command with distribution:, "
                              "or a distributed: section",
                     got=show(kind) if kind is not None else "none of these keys")
        return LoadResult(None, tuple(problems.items))
    dialect = DIALECTS[key]
    dialect.schema(launchers).check(doc.data, (), problems)
    check_document(doc.data, problems)
    ctx = Context(file, text, doc, problems, base_dir, launchers)
    try:
        spec = dialect.build(ctx, doc.data)
    except Exception:  # a builder bug must not hide the user's errors found so far
        if not problems.errors:
            raise
        spec = None
    if spec is not None and problems.errors:
        spec = None
    return LoadResult(spec, tuple(_sorted(problems.items)), key)


def _is_pipeline(data: dict[str, Any]) -> bool:
    kind = data.get("type")
    return (isinstance(kind, str) and kind.lower() == "pipeline") or (kind is None and isinstance(data.get("jobs"), dict))


def _pipeline_problem(data: dict[str, Any], problems: Problems) -> None:
    """An Azure ML pipeline is not a component: name its distributed steps and how to load one."""
    jobs: dict[str, Any] = data["jobs"] if isinstance(data.get("jobs"), dict) else {}
    steps: list[tuple[Any, Any, str | None, str]] = []
    for name, step in jobs.items():
        if not isinstance(step, dict) or not isinstance(step.get("distribution"), dict):
            continue
        kind = step["distribution"].get("type")
        component = step.get("component")
        where = (f"component {component}" if isinstance(component, str) and not component.startswith("azureml:")
                 else f"registered component {component}" if isinstance(component, str) else "inline command")
        steps.append((name, kind, component if isinstance(component, str) else None, where))
    if not steps:
        found = f"its steps ({', '.join(map(str, jobs)) or 'none'}) have no distribution:"
        problems.add(("type",) if "type" in data else (), "this is an Azure ML pipeline, not a component",
                     expected="one distributed component or command job", got=found,
                     hint="point distcomp at the component file of a step that runs distributed")
        return
    listed = "; ".join(f"jobs.{n} ({k if isinstance(k, str) else '?'} distribution, {w})" for n, k, _c, w in steps)
    name, _kind, component, _where = steps[0]
    if component is None:
        hint = (f"copy the step jobs.{name} into a file of its own (a command job with its command, "
                "environment, distribution and resources) and point distcomp at it")
    elif component.startswith("azureml:"):
        hint = f"download the registered component of jobs.{name} ({component}) and point distcomp at its file"
    else:
        hint = (f"point distcomp at the step's component file (jobs.{name}.component: {component}, relative to "
                "the pipeline's folder); give the step's own settings with --nodes, --nproc-per-node and --input")
    problems.add(("type",) if "type" in data else ("jobs",), "this is an Azure ML pipeline, not a component",
                 expected="one distributed component or command job", got=f"its distributed steps: {listed}",
                 hint=hint)


def check_file(path: str | os.PathLike[str], launchers: Mapping[str, str] | None = None) -> LoadResult:
    """Load the spec at ``path`` (never raises for a bad spec or an unreadable file)."""
    p = Path(path)
    shown = str(path)
    try:
        if p.is_dir():
            return _fail(shown, "is a folder, not a spec file", "a .yaml file")
        if p.stat().st_size > MAX_BYTES:
            return _fail(shown, f"is too large for a spec ({p.stat().st_size} bytes)", f"at most {MAX_BYTES} bytes")
        raw = p.read_bytes()
    except FileNotFoundError:
        return _fail(shown, "no such file", "the path of a spec file")
    except OSError as exc:
        return _fail(shown, f"cannot be read: {exc.strerror or exc}", "a readable file")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        return _fail(shown, f"is not UTF-8 text (byte {exc.start})", "a UTF-8 YAML file")
    result = check_text(text, shown, p.resolve().parent, launchers)
    if result.spec is not None:
        result = dataclasses.replace(result, spec=dataclasses.replace(result.spec, source=p.resolve()))
    return result


def load(path: str | os.PathLike[str], launchers: Mapping[str, str] | None = None) -> ComponentSpec:
    """The ComponentSpec at ``path``; raises SpecError listing every error."""
    result = check_file(path, launchers)
    if result.spec is None:
        raise SpecError(result.errors)
    return result.spec


def loads(text: str, file: str = "<string>", base_dir: str | os.PathLike[str] = ".",
          launchers: Mapping[str, str] | None = None) -> ComponentSpec:
    """Like ``load`` for spec text; relative paths resolve against ``base_dir``."""
    result = check_text(text, file, Path(base_dir).resolve(), launchers)
    if result.spec is None:
        raise SpecError(result.errors)
    return result.spec


def _fail(file: str, message: str, expected: str) -> LoadResult:
    return LoadResult(None, (Diagnostic(file, 1, 1, "<file>", message, expected=expected),))


def _sorted(items: list[Diagnostic]) -> list[Diagnostic]:
    return sorted(items, key=lambda d: (d.line, d.col))
