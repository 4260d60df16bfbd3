"""The ``distcomp`` command. Imports stay light: heavy modules load inside the subcommand
that needs them, so ``distcomp validate`` starts in a fraction of a second."""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path
from typing import Sequence

from . import __version__

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
SPEC_NAMES = ("component.yaml", "component.yml")


def _pairs(values: Sequence[str] | None, flag: str) -> dict[str, str]:
    """``NAME=VALUE`` flags into a dict; a malformed one is a usage error."""
    out: dict[str, str] = {}
    for item in values or ():
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise _Usage(f"{flag} {item!r}: expected NAME=VALUE")
        if name in out:
            raise _Usage(f"{flag} {name} is given twice")
        out[name] = value
    return out


class _Usage(Exception):
    pass


def _expand(paths: Sequence[str]) -> list[str]:
    """Files as given; a folder stands for the component.yaml files under it (hidden
    folders such as .venv and installed packages are skipped)."""
    out: list[str] = []
    for p in paths:
        path = Path(p)
        if path.is_dir():
            found = sorted(str(f) for name in SPEC_NAMES for f in path.rglob(name)
                           if not any(part.startswith(".") or part == "site-packages"
                                      for part in f.relative_to(path).parts))
            if not found:
                raise _Usage(f"{p}: no component.yaml under this folder")
            out.extend(found)
        else:
            out.append(p)
    return out


def cmd_validate(args: argparse.Namespace) -> int:
    from .spec import check_file

    bad = 0
    for file in _expand(args.paths):
        result = check_file(file)
        for diag in result.diagnostics:
            print(diag, file=sys.stderr)
        if result.spec is None:
            bad += 1
            n = len(result.errors)
            print(f"{file}: invalid ({n} error{'s' * (n != 1)})", file=sys.stderr)
        elif not args.quiet:
            spec, dist = result.spec, result.spec.distribution
            ppn = dist.processes_per_node or 1
            print(f"{file}: ok: {spec.ref} ({dist.launcher}, {dist.nodes} node{'s' * (dist.nodes != 1)}"
                  f" x {ppn} process{'es' * (ppn != 1)})")
    return EXIT_USAGE if bad else EXIT_OK


def cmd_render(args: argparse.Namespace) -> int:
    from .spec import InputError, RenderError, SpecError, bind_inputs, load

    try:
        spec = load(args.spec)
    except SpecError as exc:
        print(exc, file=sys.stderr)
        return EXIT_USAGE
    given = _pairs(args.input, "--input")
    outs = _pairs(args.output, "--output")
    unknown = [n for n in outs if n not in spec.outputs]
    try:
        if unknown:
            known = ", ".join(spec.outputs) or "none"
            raise InputError("\n".join(f"unknown output '{n}' (expected one of: {known})" for n in unknown))
        values = bind_inputs(spec, given, Path.cwd())
        paths = {n: str(Path(outs.get(n, Path("outputs") / n)).absolute()) for n in spec.outputs}
        env = _pairs(args.env, "--env") if args.env else None
        argv = spec.render(values, paths, env)
    except (InputError, RenderError) as exc:
        print(f"{args.spec}: {exc}".replace("\n", f"\n{args.spec}: "), file=sys.stderr)
        return EXIT_USAGE
    print(json.dumps(argv) if args.json else shlex.join(argv))
    return EXIT_OK


def cmd_schema(args: argparse.Namespace) -> int:
    from .spec import json_schema

    text = json.dumps(json_schema(args.dialect), indent=2) + "\n"
    if args.output:
        Path(args.output).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="distcomp", description="Distributed training as a reusable pipeline component.")
    parser.add_argument("--version", action="version", version=f"distcomp {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    p = sub.add_parser("validate", help="check spec files; exit 0 if all are valid, 2 otherwise",
                       description="Check spec files in any dialect. Errors go to stderr as FILE:LINE:COL: field: problem.")
    p.add_argument("paths", nargs="+", metavar="PATH", help="spec files, or folders holding component.yaml files")
    p.add_argument("-q", "--quiet", action="store_true", help="print only problems")
    p.set_defaults(func=cmd_validate)

    p = sub.add_parser("render", help="print the argv a rank would run, for debugging templates")
    p.add_argument("spec", metavar="SPEC")
    p.add_argument("--input", "-i", action="append", metavar="NAME=VALUE", help="an input value (repeatable)")
    p.add_argument("--output", "-o", action="append", metavar="NAME=PATH", help="an output path (default ./outputs/NAME)")
    p.add_argument("--env", action="append", metavar="NAME=VALUE",
                   help="fill $NAME references (without --env they are shown as ${NAME})")
    p.add_argument("--json", action="store_true", help="print the argv as a JSON list")
    p.set_defaults(func=cmd_render)

    p = sub.add_parser("schema", help="print the JSON Schema of the DistributedComponent dialect")
    p.add_argument("--dialect", choices=("sdk", "v2", "draft"), default="sdk",
                   help="sdk: DistributedComponent (default); v2: azure-ai-ml command; draft: distributed job")
    p.add_argument("--output", "-o", metavar="FILE", help="write to FILE instead of stdout")
    p.set_defaults(func=cmd_schema)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except _Usage as exc:
        print(f"distcomp {args.command}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("distcomp: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return EXIT_FAILED
