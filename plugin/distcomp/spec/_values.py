"""Input values: check YAML defaults, parse ``--input NAME=VALUE`` strings, render for argv.

Rendering follows Azure ML, whose command lines these specs were written for: booleans are
``True`` / ``False``, numbers in their shortest form (``0.2``, ``1e-05``), ports as paths.
"""

from __future__ import annotations

import math
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Mapping

from ..errors import UsageError
from ..base.redact import Masker
from ._diagnostics import did_you_mean, one_of, show
from ._limits import UTF8_HINT, arg_problem, utf8_problem
from ._render import render_value as render_value

if TYPE_CHECKING:
    from ._model import ComponentSpec, InputSpec

_INT = re.compile(r"[+-]?\d+")
_TRUE = {"true", "yes", "1", "on"}
_FALSE = {"false", "no", "0", "off"}
TYPE_WORDS = {
    "integer": "an integer", "number": "a number", "boolean": "true or false",
    "string": "a string", "enum": "one of the enum values",
}


def is_uri(text: str) -> bool:
    """``azureml:x:1``, ``https://...``, ``gs://...``: not a local path."""
    return "://" in text or text.startswith(("azureml:", "git+"))


def check_default(spec: "InputSpec", value: Any) -> tuple[Any, str | None, str | None]:
    """``(typed value, problem, expected)`` for a default written in YAML."""
    t = spec.type
    if spec.is_port:
        if not isinstance(value, str):
            return None, "wrong type for a port default", "a path or URI"
        return value, None, None
    if t == "integer":
        if isinstance(value, bool) or not isinstance(value, int):
            return None, "wrong type", "an integer"
    elif t == "number":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return None, "wrong type", "a number"
        value = float(value) if isinstance(value, float) else value
    elif t == "boolean":
        if not isinstance(value, bool):
            return None, "wrong type", "true or false"
    elif t in ("string", "enum"):
        if isinstance(value, (dict, list)) or value is None:
            return None, "wrong type", "a string"
        value = render_value(value) if not isinstance(value, str) else value
    problem, expected = _constraints(spec, value)
    return (None, problem, expected) if problem else (value, None, None)


def _constraints(spec: "InputSpec", value: Any) -> tuple[str | None, str | None]:
    """``(problem, expected)`` where ``value`` breaks the input's enum, min or max; the value
    itself is the caller's to show, once."""
    if spec.enum is not None and str(value) not in spec.enum:
        return "not one of the enum values", one_of(spec.enum)
    if spec.min is not None and isinstance(value, (int, float)) and value < spec.min:
        return "below the minimum", f">= {spec.min}"
    if spec.max is not None and isinstance(value, (int, float)) and value > spec.max:
        return "above the maximum", f"<= {spec.max}"
    return None, None


def parse_value(spec: "InputSpec", text: str, base: Path | None = None) -> Any:
    """Parse a command-line value; raises ValueError with a message naming the input. A relative
    port path is taken from ``base`` (default: this process's working folder)."""
    not_text = utf8_problem(text)  # first: the byte count below encodes the text
    if not_text:
        raise ValueError(f"input '{spec.name}': the value {not_text}; {UTF8_HINT}")
    unpassable = arg_problem(text)
    if unpassable:
        raise ValueError(f"input '{spec.name}': the value {unpassable[0]}; {unpassable[1]}")
    t = spec.type
    if spec.is_port:
        if is_uri(text):
            return text
        path = Path(text)
        try:
            path = path.expanduser()
        except RuntimeError:  # '~nosuchuser': keep it as written
            pass
        # against ``base`` when given (a relative base keeps it relative: a pod's own working folder)
        return base / path if base is not None and not path.is_absolute() else path.absolute()
    value: Any
    if t == "integer":
        if not _INT.fullmatch(text.strip()):
            raise ValueError(f"input '{spec.name}' must be an integer, got {show(text)}")
        value = _int(spec, text)
    elif t == "number":
        if _INT.fullmatch(text.strip()):
            value = _int(spec, text)  # exact: 10 stays 10, not 10.0
        else:
            try:
                value = float(text)
            except ValueError:
                value = math.nan
            if not math.isfinite(value):
                raise ValueError(f"input '{spec.name}' must be a finite number, got {show(text)}")
    elif t == "boolean":
        low = text.strip().lower()
        if low not in _TRUE | _FALSE:
            raise ValueError(f"input '{spec.name}' must be true or false, got {show(text)}")
        value = low in _TRUE
    else:
        value = text
    problem, expected = _constraints(spec, value)
    if problem:  # "must be one of: a, b; got 'c'": a comma would read as one more enum value
        raise ValueError(f"input '{spec.name}' must be {expected}{';' if spec.enum else ','} got {show(value)}")
    return value


def _int(spec: "InputSpec", text: str) -> int:
    """``int(text)`` within Python's limit on digits (``sys.get_int_max_str_digits``), which a
    value must also keep to be rendered back into the command line."""
    digits = len(text.strip().lstrip("+-"))
    limit = sys.get_int_max_str_digits()
    if limit and digits > limit:
        raise ValueError(f"input '{spec.name}' must be {'an integer' if spec.type == 'integer' else 'a number'} of "
                         f"at most {limit} digits (Python's limit), got one of {digits} digits; pass large data in "
                         "a file (a path input) instead")
    return int(text)


class InputError(UsageError, ValueError):
    """Bad ``--input`` / ``--output`` values; the message lists every problem."""


def bind_inputs(spec: "ComponentSpec", given: Mapping[str, str], base: Path | None = None) -> dict[str, Any]:
    """Typed values for every input: given ones parsed, the rest from defaults.

    Unset optional inputs are absent from the result (their blocks vanish); every problem
    is reported at once.
    """
    values, problems = check_inputs(spec, given, base)
    if problems:
        raise InputError("\n".join(problems))
    return values


def check_inputs(spec: "ComponentSpec", given: Mapping[str, str], base: Path | None = None,
                 code_at: Path | None = None) -> tuple[dict[str, Any], list[str]]:
    """``bind_inputs`` without raising: the values that bound, and one line per problem, so a
    caller can check the bound ones further (a port's path) and report everything in one pass.
    ``code_at``: the code folder's path where the command runs when that is not this machine
    (a pod's): a relative default is then taken there, not from this machine's spec folder."""
    problems: list[str] = []
    out: dict[str, Any] = {}
    for name in given:
        if name not in spec.inputs:
            hint = did_you_mean(name, spec.inputs)
            known = ", ".join(spec.inputs) or "none"
            problems.append(f"unknown input '{name}' (expected one of: {known})" + (f"; {hint}" if hint else ""))
    for name, inp in spec.inputs.items():
        if name in given or (inp.is_port and inp.default is not None):
            try:  # a port's default is a path, resolved like a given one, from where the dialect says
                out[name] = parse_value(inp, given.get(name, inp.default),
                                        base if name in given else _defaults_base(spec, base, code_at))
            except ValueError as exc:  # the message shows the value: masked when the name is secret
                raw = given.get(name, inp.default)  # ... unless it is no text, which it then does not show
                unmaskable = isinstance(raw, str) and utf8_problem(raw)
                problems.append(str(exc) if unmaskable else Masker.of({name: raw}).text(str(exc)))
        elif inp.default is not None:
            out[name] = inp.default
        elif not inp.optional:
            problems.append(f"missing required input '{name}' (give it with --input {name}=VALUE)")
    return out, problems


def _defaults_base(spec: "ComponentSpec", base: Path | None, code_at: Path | None) -> Path | None:
    """Where a relative port default is taken from: the spec's ``paths_base`` (azure-ai-ml: the
    YAML's folder), else ``base``. Elsewhere (``code_at``, a pod's code folder) the same place
    under the shipped code folder, or, when the spec's folder is not in it, ``code_at`` itself."""
    if spec.paths_base is None:
        return base if code_at is None else code_at
    if code_at is None:
        return spec.paths_base
    try:
        return code_at / spec.paths_base.relative_to(spec.code)
    except ValueError:  # the spec's folder is not shipped: where the command runs, as before
        return code_at


def unknown_outputs(spec: "ComponentSpec", names: Iterable[str]) -> list[str]:
    """One line per name in ``names`` that is no output of ``spec``."""
    known = ", ".join(spec.outputs) or "none"
    lines = []
    for name in names:
        if name not in spec.outputs:
            hint = did_you_mean(name, spec.outputs)
            lines.append(f"unknown output '{name}' (expected one of: {known})" + (f"; {hint}" if hint else ""))
    return lines
