"""A spec on its own, nothing run: ``distcomp.validate``, ``render`` and ``schema`` (what
``distcomp validate|render|schema`` print).

>>> import distcomp
>>> report = distcomp.validate("examples/pytorch-ddp/component.yaml")             # doctest: +SKIP
>>> report.ok, report.files[0].summary()                                           # doctest: +SKIP
(True, 'pytorch-ddp@1.0.0 (torch, 1 node x 2 processes)')
>>> distcomp.render("examples/pytorch-ddp/component.yaml", inputs={"epochs": 1}).line  # doctest: +SKIP
"python train.py --epochs 1 ..."
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Callable, Mapping

from ..errors import UsageError

if TYPE_CHECKING:
    from . import SpecRef
    from ..function import FunctionComponent
    from ..spec import ComponentSpec, Diagnostic, LoadResult

__all__ = ["Rendered", "SpecCheck", "ValidationReport", "render", "schema", "validate"]

SPEC_NAMES = ("component.yaml", "component.yml")


@dataclass(frozen=True)
class SpecCheck:
    """One spec file checked: every diagnostic (errors and warnings, as found); for a valid spec,
    what runs (the user's own launcher's count folded in) and the plan's warnings."""

    path: str
    diagnostics: tuple["Diagnostic", ...]
    spec: "ComponentSpec | None" = None
    launcher: str | None = None
    nodes: int = 0
    processes_per_node: int = 0
    layout: str | None = None  # the command's own launcher, as the plan describes it
    warnings: tuple[str, ...] = ()  # the plan's (own-launcher contradictions, launcher advice); a launcher not here

    @property
    def ok(self) -> bool:
        return self.spec is not None

    @property
    def errors(self) -> tuple["Diagnostic", ...]:
        return tuple(d for d in self.diagnostics if d.severity == "error")

    def summary(self) -> str:
        """``ref (launcher, N node(s) x P process(es)[; layout])``, or ``invalid (N errors)``."""
        if self.spec is None:
            n = len(self.errors)
            return f"invalid ({n} error{'s' * (n != 1)})"
        how = f"; {self.layout}" if self.layout else ""
        return (f"{self.spec.ref} ({self.launcher}, {self.nodes} node{'s' * (self.nodes != 1)} x "
                f"{self.processes_per_node} process{'es' * (self.processes_per_node != 1)}{how})")


@dataclass(frozen=True)
class ValidationReport:
    """Every spec file checked, in order (a folder stands for the component.yaml files under it)."""

    files: tuple[SpecCheck, ...]

    @property
    def ok(self) -> bool:
        return all(f.ok for f in self.files)

    @property
    def invalid(self) -> tuple[SpecCheck, ...]:
        return tuple(f for f in self.files if not f.ok)

    @property
    def exit_code(self) -> int:
        """``distcomp validate``'s: 0 when every file is valid, else 2."""
        return 0 if self.ok else 2


@dataclass(frozen=True)
class Rendered:
    """The command line a rank runs, with the job's secrets masked as compile and the logs show
    them: ``line`` as the shell gets it, ``argv`` as each rank executes it (words, or sh -c LINE)."""

    line: str
    argv: tuple[str, ...]
    outputs: Mapping[str, str]  # each output's path, as put into the command


def _check(file: "str | FunctionComponent", table: Mapping[str, str]) -> "LoadResult":
    """A spec file's check, or a function component's: its spec text, against its code folder."""
    from ..function._resolve import as_component
    from ..spec import check_file, check_text

    function = as_component(file)
    if function is None:
        assert isinstance(file, str)
        return check_file(file, table)
    return check_text(function.spec_text(), _shown(file), function.code, table)


def _shown(file: "str | FunctionComponent") -> str:
    return file if isinstance(file, str) else f"{file.origin.file}:{file.origin.qualname}"


def _expand(paths: tuple["str | os.PathLike[str] | FunctionComponent", ...]) -> "list[str | FunctionComponent]":
    """Files as given; a folder stands for the component.yaml files under it (hidden folders such
    as .venv, and installed packages, are skipped); a function component as it is."""
    out: "list[str | FunctionComponent]" = []
    for given in paths:
        if not isinstance(given, (str, os.PathLike)):
            out.append(given)
            continue
        p = os.fspath(given)
        path = Path(p)
        if path.is_dir():
            found = sorted(str(f) for name in SPEC_NAMES for f in path.rglob(name)
                           if not any(part.startswith(".") or part == "site-packages"
                                      for part in f.relative_to(path).parts))
            if not found:
                raise UsageError(f"{p}: no component.yaml under this folder")
            out.extend(found)
        else:
            out.append(p)
    return out


def _launchers() -> Mapping[str, str]:
    from ..core.plugins import get_plugin_manager  # its PluginError (a conflict) is a UsageError

    return get_plugin_manager().alias_table()


def validate(*paths: "str | os.PathLike[str] | FunctionComponent") -> ValidationReport:
    """Check spec files in any dialect, and folders' component.yaml files (``distcomp validate``);
    a function component (or ``FILE.py:FUNCTION``) is checked as the spec it makes. A bad spec
    is reported, never raised; a folder with no spec in it, or a function that is no component,
    raises a UsageError."""
    from ..core.own import missing
    from ..core.plan import make_plan

    table = _launchers()
    checks = []
    for file in _expand(paths):
        result = _check(file, table)
        if result.spec is None:
            checks.append(SpecCheck(_shown(file), result.diagnostics))
            continue
        spec, dist = result.spec, result.spec.distribution
        try:
            plan = make_plan(spec)
        except UsageError as exc:  # the spec loads, but cannot run as written (mpirun -np over its slots)
            checks.append(SpecCheck(_shown(file), (*result.diagnostics, _plan_error(file, spec, str(exc)))))
            continue
        own, ppn = plan.own, dist.processes_per_node or 1
        if own is not None and not own.once:  # what really runs: the user's launcher's count
            ppn = own.processes_per_node or ppn
        # only here, not in the plan: a compile for a cluster need not find the program on this machine
        absent = missing(spec) if own is not None else None
        checks.append(SpecCheck(_shown(file), result.diagnostics, spec, dist.launcher, dist.nodes, ppn,
                                own.describe() if own is not None else None,
                                (*plan.warnings, *([absent] if absent else []))))
    return ValidationReport(tuple(checks))


def _plan_error(file: "str | FunctionComponent", spec: "ComponentSpec", message: str) -> "Diagnostic":
    """The plan's refusal as an error at the spec's command (its line, where the file says it)."""
    from ..spec import Diagnostic
    from ..spec._parsecache import parse

    line, col, where = 1, 1, "command"
    if isinstance(file, str) and spec.source is not None:
        doc, _ = parse(spec.source.read_text(encoding="utf-8-sig"), file)
        path = ("command",) if isinstance(doc.data, dict) and "command" in doc.data else \
            ("launcher", "additional_arguments")
        (line, col), where = doc.locate(path), ".".join(path)
    return Diagnostic(_shown(file), line, col, where, message.removeprefix(f"{spec.ref}: "))


def render(spec: "SpecRef", *, inputs: Mapping[str, Any] | None = None, outputs: Mapping[str, str] | None = None,
           env: Mapping[str, str] | None = None, warn: Callable[[str], None] | None = None) -> Rendered:
    """The command line each rank of ``spec`` runs (``distcomp render``): ``inputs`` bound as on
    the command line, ``outputs`` default ``./outputs/NAME``; ``env`` fills ``$NAME`` as one rank
    with those values sees it. A bad input or output raises InputError, a template RenderError."""
    from . import _text, load
    from ..base.redact import job_masker
    from ..spec import InputError, check_inputs, unknown_outputs
    from ..spec._template import SHELL

    loaded: "ComponentSpec" = load(spec, warn=warn)
    outs = dict(outputs or {})
    values, problems = check_inputs(loaded, {k: _text(v) for k, v in (inputs or {}).items()}, Path.cwd())
    problems = unknown_outputs(loaded, outs) + problems
    if problems:
        raise InputError("\n".join(problems))
    paths = {n: str(Path(outs.get(n, Path("outputs") / n)).absolute()) for n in loaded.outputs}
    given = dict(env) if env else None
    argv = loaded.render(values, paths)
    line = loaded.shell_line(values, paths, given)
    if given and argv[:2] == list(SHELL):  # env: as one rank with those values runs it
        argv = [*SHELL, line]
    masker = job_masker(loaded, values, given)
    return Rendered(masker.text(line), tuple(masker.argv(argv)), MappingProxyType(paths))


def schema(dialect: str = "sdk") -> dict[str, Any]:
    """The JSON Schema of a spec dialect (``distcomp schema``): ``sdk`` (DistributedComponent),
    ``v2`` (an azure-ai-ml command) or ``draft`` (a distributed job); the launcher names are the
    installed ones."""
    from ..spec import json_schema
    from ..spec._loader import DIALECTS

    if dialect not in DIALECTS:
        raise UsageError(f"unknown dialect {dialect!r}; expected one of: {', '.join(DIALECTS)}")
    return json_schema(dialect, _launchers())
