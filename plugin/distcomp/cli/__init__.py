"""The ``distcomp`` command: a thin layer over ``distcomp.api``, one module per group of
commands. Imports stay light: heavy modules load inside the command that needs them, so
``distcomp validate`` starts in a fraction of a second."""

from __future__ import annotations

import argparse
import gc
import importlib
import os
import sys
from typing import Any, Sequence

from .. import __version__
from ..errors import DistcompError
from ._common import EXIT_FAILED, _Usage, error_text, file_flag
from ._console import guard

__all__ = ["GROUPS", "build_parser", "main"]


# The module whose parsers hold each command: a command line that names one builds only that
# module's (argparse spends ~5 ms on all sixteen, a tenth of `distcomp run`'s own start); help,
# a bare `distcomp` or an unknown command build them all, for the list of commands.
GROUPS = {"validate": "_specs", "render": "_specs", "schema": "_specs", "run": "_run", "compile": "_targets",
          "submit": "_targets", "status": "_targets", "logs": "_targets", "cancel": "_targets",
          "targets": "_targets", "launchers": "_targets", "build-context": "_image", "reap": "_admin",
          "registry": "_registry"}


class _Formatter(argparse.HelpFormatter):
    """argparse's help formatter, as wide as the terminal (``shutil.get_terminal_size``'s rule)
    but without importing shutil: argparse makes one in every ``add_argument``, and shutil, with
    its compression modules, is nothing else `distcomp run` needs."""

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24,
                 width: int | None = None) -> None:
        super().__init__(prog, indent_increment, max_help_position, _columns() - 2 if width is None else width)


def _columns() -> int:
    try:
        columns = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns or 80


class _Parser(argparse.ArgumentParser):
    """Every parser of the command, subcommands' too (argparse makes those of the same class)."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(**kwargs)


def build_parser(argv: Sequence[str] = (), every: bool = False) -> argparse.ArgumentParser:
    """The parser; ``argv`` tells which target's flags ``compile``/``submit`` take, and a
    command it starts with is the one whose group of parsers is built (``GROUPS``), unless
    ``every``."""
    only = GROUPS.get(argv[0]) if argv and not every else None
    parser: argparse.ArgumentParser = _Parser(prog="distcomp",
                                              description="Distributed training as a reusable pipeline component.")
    parser.add_argument("--version", action="version", version=f"distcomp {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for group in ("_specs", "_run", "_targets", "_image", "_admin", "_registry"):  # the order of `distcomp --help`
        if only in (None, group):  # a module is imported only for its parsers (the others cost `distcomp run` ~1 ms)
            module = importlib.import_module(f"{__name__}.{group}")
            module.add_parsers(sub, argv)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    with guard():  # a console that goes away (`| head`) ends what is shown, not what is done
        code = _main(argv)
    if argv is None:  # the program itself (its console script, python -m distcomp), not a caller's call:
        gc.freeze()  # what it made lives until its exit, where the interpreter's collections now skip it (~10 ms)
    return code


def _main(argv: Sequence[str] | None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    command = next((a for a in argv if not a.startswith("-")), "")
    try:
        # `distcomp -h run` is the top-level help: every command is listed
        parser = build_parser(argv[argv.index(command):] if command else argv, every=argv[:1] != [command])
    except DistcompError as exc:  # an unknown --target, a plugin conflict
        print(f"distcomp {command}: {exc}", file=sys.stderr)
        return exc.exit_code
    args, extras = parser.parse_known_args(argv)
    try:
        file_flag(args.command, argv)  # `compile -o FILE`: the file is --out FILE
        if extras:
            if args.command in ("compile", "submit"):
                from ._targets import foreign_flags

                foreign_flags(extras, args.target)
            parser.parse_args(argv)  # argparse's own error for what no target takes (exit 2)
        return int(args.func(args))
    except DistcompError as exc:  # the user's mistake (exit 2) or a job that could not run (exit 1)
        print(f"distcomp {args.command}: {error_text(exc)}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("distcomp: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # written past the guard (a stream's .buffer): the command could not finish
        return EXIT_FAILED


_ = _Usage  # the CLI's own usage error, for callers that catch it
