"""What every command shares: exit codes, flag parsers, how a spec is loaded, how distcomp speaks."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Sequence

from ..errors import UsageError

if TYPE_CHECKING:
    from ..spec import ComponentSpec

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
SPEC_HELP = ("a spec file (any dialect), a folder holding component.yaml, a registry reference such as "
             "NAME@1.2.0, NAME@latest, NAME@^1.2 ($DISTCOMP_REGISTRY, else the user's registry), or FILE.py:FUNCTION "
             "(a @distcomp.component)")


class _Usage(UsageError):
    """A usage error the CLI itself finds (an option, a folder with no spec, ...)."""


def pairs(values: Sequence[str] | None, flag: str, separator: str = "=", shape: str = "NAME=VALUE",
          twice: list[str] | None = None) -> dict[str, str]:
    """``NAME=VALUE`` flags into a dict; a malformed one is a usage error. A name given twice is
    one too, unless ``twice`` collects it (its first value kept) to be refused with every other
    problem (``refuse_twice``)."""
    out: dict[str, str] = {}
    for item in values or ():
        name, sep, value = item.partition(separator)
        if not sep or not name or (separator != "=" and not value):
            raise _Usage(f"{flag} {item!r}: expected {shape}")
        if name in out:
            if twice is None:
                raise _Usage(f"{flag} {name} is given twice")
            line = f"{flag} {name} is given twice"
            twice += [] if line in twice else [line]
            continue
        out[name] = value
    return out


def refuse_twice(twice: Sequence[str], check: Callable[[], object]) -> None:
    """Refuse the names given twice (if any) together with whatever else ``check`` (the
    command's own checks, which create nothing) finds wrong, so that one try names them all."""
    if not twice:
        return
    from ..spec import InputError

    try:
        check()
    except UsageError as exc:
        raise InputError("\n".join([*twice, *str(exc).splitlines()])) from None
    raise InputError("\n".join(twice))


def load_spec(ref: str) -> "ComponentSpec":
    """The spec at ``ref`` (a file, a folder holding component.yaml, a registry reference, or
    ``FILE.py:FUNCTION``);
    every problem is a usage error (exit 2)."""
    from ..api import load

    return load(ref, warn=deprecated)


def check_status_file(path: str | None, spec: "ComponentSpec") -> None:
    """``--status-file``: refused before anything starts where an output file could not go either
    (``jobs.status_file_problem``), so a bad one costs no run and overwrites nothing."""
    from ..core.jobs import status_file_problem

    why = status_file_problem(Path(path), spec, Path.cwd()) if path else None
    if why:
        raise _Usage(why)


def deprecated(message: str) -> None:
    """A deprecated registry version named exactly still loads; say so in one line."""
    print(f"distcomp: warning: {message}", file=sys.stderr)


WRITERS = ("compile", "render", "schema")  # the commands that write a file, or print what one would hold


def file_flag(command: str, argv: "Sequence[str]") -> None:
    """``-o FILE`` (no ``=``) to a command that writes a file: ``-o`` is ``--output NAME=PATH``, a
    component output, in every command; the file is ``--out FILE``. Say so, not that the
    pair is malformed or that ``-o`` belongs to another target."""
    if command not in WRITERS:
        return
    flags = ("-o", "--output") if command == "schema" else ("-o",)  # schema has no component outputs
    for i, arg in enumerate(argv):
        if arg.startswith("--"):
            flag, eq, given = arg.partition("=")
            value = given if eq else None
        else:  # -o FILE, -oFILE
            flag, value = arg[:2], arg[2:] or None
        if flag not in flags:
            continue
        if value is None:
            value = argv[i + 1] if i + 1 < len(argv) else ""
        if "=" in value:
            continue
        fix = ("render prints to stdout: redirect it (> FILE)" if command == "render" else
               f"write to a file with --out {shlex.quote(value) if value else 'FILE'}")
        raise _Usage(f"{flag} {value}: -o (--output) gives a component output as NAME=PATH; {fix}".replace("  ", " "))


def error_text(exc: Exception) -> str:
    """An error's message as the console shows it: a list of bad inputs one problem a line, each
    after the first indented under ``distcomp COMMAND:``."""
    from ..spec import InputError

    if not isinstance(exc, InputError):
        return str(exc)
    first, *rest = str(exc).splitlines() or [""]
    return "\n".join([first, *(line if line.startswith(" ") else "  " + line for line in rest)])


def speaker(command: str) -> Callable[[str], None]:
    """distcomp's own progress and reports go to stderr (rank output goes to stdout)."""
    def say(message: str) -> None:
        from ._live import cleared

        with cleared():  # a live line on the terminal is erased first, drawn again after
            print(f"distcomp {command}: {message}", file=sys.stderr, flush=True)
    return say


def rel(path: Path) -> str:
    """A path as printed: usable from the user's folder (``distcomp.base.files.shown_path``)."""
    from ..base.files import shown_path

    return shown_path(path)


def number(kind: type, minimum: float, what: str) -> Callable[[str], float]:
    def parse(text: str) -> float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
        if value < minimum or value != value:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}")
        return value
    return parse


positive = number(int, 1, "an integer >= 1")
count = number(int, 0, "an integer >= 0")
count_float = number(float, 0, "a number of seconds >= 0")
seconds = number(float, 1e-9, "a number of seconds > 0")


def echo(text: str) -> None:
    """Rank output to the console as soon as its batch is in the logs (see targets.local._output)."""
    from ._console import gone
    from ._live import cleared

    with cleared():  # a live line on the terminal is erased first, drawn again after (``_live``)
        sys.stdout.write(text)  # best effort (``_console.guard``): a reader gone away sends it to /dev/null
        sys.stdout.flush()
    if gone(sys.stdout):  # ... and stops the echo (targets.local._output)
        raise BrokenPipeError("the console's reader went away")
