"""The ``distcomp`` command: a thin layer over ``distcomp.api``, one module per group of
commands. Imports stay light: heavy modules load inside the command that needs them, so
``distcomp validate`` starts in a fraction of a second."""

from __future__ import annotations

import argparse
import sys
from typing import Sequence

from .. import __version__
from ..errors import DistcompError
from ._common import EXIT_FAILED, _Usage
from ._console import guard

__all__ = ["build_parser", "main"]


def build_parser(argv: Sequence[str] = ()) -> argparse.ArgumentParser:
    """The parser; ``argv`` tells which target's flags ``compile``/``submit`` take."""
    from . import _admin, _image, _run, _specs, _targets

    parser = argparse.ArgumentParser(prog="distcomp", description="Distributed training as a reusable pipeline component.")
    parser.add_argument("--version", action="version", version=f"distcomp {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    _specs.add_parsers(sub)
    _run.add_parser(sub)
    _targets.add_parsers(sub, argv)
    _image.add_parser(sub)
    _admin.add_parsers(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    with guard():  # a console that goes away (`| head`) ends what is shown, not what is done
        return _main(argv)


def _main(argv: Sequence[str] | None) -> int:
    from ._targets import foreign_flags

    argv = list(sys.argv[1:] if argv is None else argv)
    command = next((a for a in argv if not a.startswith("-")), "")
    try:
        parser = build_parser(argv[argv.index(command):] if command else argv)
    except DistcompError as exc:  # an unknown --target, a plugin conflict
        print(f"distcomp {command}: {exc}", file=sys.stderr)
        return exc.exit_code
    args, extras = parser.parse_known_args(argv)
    try:
        if extras:
            if args.command in ("compile", "submit"):
                foreign_flags(extras, args.target)
            parser.parse_args(argv)  # argparse's own error for what no target takes (exit 2)
        return int(args.func(args))
    except DistcompError as exc:  # the user's mistake (exit 2) or a job that could not run (exit 1)
        print(f"distcomp {args.command}: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("distcomp: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # written past the guard (a stream's .buffer): the command could not finish
        return EXIT_FAILED


_ = _Usage  # the CLI's own usage error, for callers that catch it
