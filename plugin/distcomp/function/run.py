"""The runner every rank of a function component executes (stdlib and distcomp only):

    python -m distcomp.function.run [--path FOLDER] [--inline PAYLOAD] MODULE:QUALNAME [--NAME VALUE]...

It imports MODULE with the current folder (the code folder; ``--path``: that folder inside it)
first on sys.path (or, with ``--inline``, defines the function from the source the payload
holds: a notebook's function, see ``_inline``), never unpickling anything, converts each value back to the parameter's type
and calls the function. A function that raises fails the rank (exit 1) with its traceback on
stderr, which the rank's log tail makes the job's root cause; where the launcher gives a
``TORCHELASTIC_ERROR_FILE``, the exception is also written there as torch's ``@record`` does.
A return value is dropped (a warning on stderr when it is not None). Exit 2: the runner was
called wrongly (a module or parameter that is not there)."""

from __future__ import annotations

import os
import sys
from typing import Any, Callable, Sequence

USAGE = "usage: python -m distcomp.function.run [--path FOLDER] [--inline PAYLOAD] MODULE:QUALNAME [--NAME VALUE]..."


class _Usage(Exception):
    pass


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        path, inline, target, pairs = _parse(args)
    except _Usage as exc:
        print(f"distcomp.function.run: {exc}\n{USAGE}", file=sys.stderr)
        return 2
    folder = os.path.abspath(path)
    if sys.path[:1] != [folder]:
        sys.path.insert(0, folder)
    module, _, qualname = target.partition(":")
    fn = _import(module, qualname) if inline is None else _define(inline, qualname)
    if isinstance(fn, int):
        return fn
    function, params = fn
    try:
        values = _values(params, pairs, target)
    except _Usage as exc:
        print(f"distcomp.function.run: {exc}", file=sys.stderr)
        return 2
    problem = _make_outputs(values)
    if problem:
        print(f"distcomp.function.run: {problem}", file=sys.stderr)
        return 1
    try:
        result = function(**values)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:
        _report(exc, target)
        return 1
    if result is not None:
        print(f"distcomp.function.run: warning: {target} returned {type(result).__name__} {_short(result)}; a "
              "component's return value is dropped (write results to an Output)", file=sys.stderr, flush=True)
    return 0


def _parse(args: list[str]) -> tuple[str, str | None, str, list[tuple[str, str]]]:
    given: dict[str, str] = {}
    while args[:1] in (["--path"], ["--inline"]):
        if len(args) < 2:
            raise _Usage(f"{args[0]} needs a value")
        given[args[0][2:]] = args[1]
        args = args[2:]
    path, inline = given.get("path", "."), given.get("inline")
    if not args or ":" not in args[0] or args[0].startswith("-"):
        raise _Usage("expected MODULE:QUALNAME first")
    target, rest = args[0], args[1:]
    if len(rest) % 2:
        raise _Usage(f"expected --NAME VALUE pairs after {target} (got an odd count: {len(rest)})")
    pairs = []
    for flag, value in zip(rest[::2], rest[1::2]):
        if not flag.startswith("--") or len(flag) < 3:
            raise _Usage(f"expected --NAME before a value, got {flag!r}")
        pairs.append((flag[2:], value))
    return path, inline, target, pairs


def _define(payload: str, qualname: str) -> "tuple[Callable[..., Any], tuple[Any, ...]] | int":
    """The function sent inline (a notebook's) and its parameters, or the exit code of a
    failure (reported): a payload that does not decode is a runner called wrongly."""
    from ._inline import define

    try:
        return define(payload, qualname)
    except (ValueError, KeyError, TypeError) as exc:  # zlib.error and binascii.Error are ValueErrors
        print(f"distcomp.function.run: --inline holds no function {qualname} ({type(exc).__name__}: {exc})",
              file=sys.stderr)
        return 2
    except Exception as exc:  # its definition raised (a default, a decorator): the rank's root cause
        _report(exc, qualname, f"cannot define {qualname} from its source")
        return 1


def _import(module: str, qualname: str) -> "tuple[Callable[..., Any], tuple[Any, ...]] | int":
    """The function and its parameters, or the exit code of a failed import (reported)."""
    import importlib

    from . import _guard

    _guard.importing = True
    try:
        obj: Any = importlib.import_module(module)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:
        _report(exc, f"{module}:{qualname}", f"cannot import {module} (from {os.getcwd()})")
        return 1
    finally:
        _guard.importing = False
    for part in qualname.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            print(f"distcomp.function.run: {module} has no {qualname} (the code folder {os.getcwd()} holds another "
                  "version of the module?)", file=sys.stderr)
            return 2
    from ._component import FunctionComponent

    if isinstance(obj, FunctionComponent):
        return obj.fn, obj.params
    if not callable(obj):
        print(f"distcomp.function.run: {module}:{qualname} is a {type(obj).__name__}, not a function", file=sys.stderr)
        return 2
    from ._signature import FunctionError, parameters

    try:
        return obj, parameters(obj, f"{module}:{qualname}")
    except FunctionError as exc:
        print(f"distcomp.function.run: {exc}", file=sys.stderr)
        return 2


def _values(params: tuple[Any, ...], pairs: list[tuple[str, str]], target: str) -> dict[str, Any]:
    from ._convert import from_text

    by_name = {p.name: p for p in params}
    values: dict[str, Any] = {}
    for name, text in pairs:
        param = by_name.get(name)
        if param is None:
            raise _Usage(f"{target} has no parameter {name!r} (it has: {', '.join(by_name) or 'none'})")
        if name in values:
            raise _Usage(f"--{name} is given twice")
        try:
            values[name] = from_text(param, text)
        except ValueError as exc:
            raise _Usage(str(exc)) from None
    missing = [p.name for p in params if p.name not in values and p.required]
    if missing:
        raise _Usage(f"{target}: no value for {', '.join(missing)}")
    return values


def _make_outputs(values: dict[str, Any]) -> str | None:
    """Make each Output's folder, as a local run does before the ranks start, where the target
    did not (a Kubeflow pod's volume, a node of a cluster): an Output is a folder to write in on
    every target. An existing file is left as it is. Returns what could not be made."""
    from ._ports import Output

    for name, value in values.items():
        if isinstance(value, Output) and not os.path.isfile(value):
            try:
                os.makedirs(value, exist_ok=True)
            except OSError as exc:
                return f"cannot make the folder of output {name!r} at {value}: {exc.strerror or exc}"
    return None


def _report(exc: BaseException, target: str, what: str | None = None) -> None:
    """The traceback on stderr, the runner's own frames left out; the error file where asked."""
    import traceback

    tb = exc.__traceback__
    here = os.path.abspath(__file__)
    while tb is not None and os.path.abspath(tb.tb_frame.f_code.co_filename) == here:
        tb = tb.tb_next
    lines = traceback.format_exception(type(exc), exc, tb)
    text = "".join(lines)
    head = what or f"{target} raised {type(exc).__name__}"
    sys.stderr.write(f"distcomp.function.run: {head}\n{text}")
    sys.stderr.flush()
    _error_file(exc, text)


def _error_file(exc: BaseException, text: str) -> None:
    """Torch's ``@record`` format, so the launcher's supervisor reports it as for scripts."""
    path = os.environ.get("TORCHELASTIC_ERROR_FILE")
    if not path or os.path.exists(path):
        return
    import json
    import time

    data = {"message": {"message": f"{type(exc).__name__}: {exc}",
                        "extraInfo": {"py_callstack": text, "timestamp": str(int(time.time()))}}}
    try:
        with open(path, "x", encoding="utf-8") as f:
            json.dump(data, f)
    except OSError:  # the traceback on stderr is the report then
        pass


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


if __name__ == "__main__":
    sys.exit(main())
