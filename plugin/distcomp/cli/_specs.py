"""``distcomp validate``, ``render`` and ``schema``: a spec on its own, nothing run (each one call of
``distcomp.validate|render|schema``, its record printed)."""

from __future__ import annotations

import argparse
from typing import Sequence
import json
import sys
from pathlib import Path

from ._common import EXIT_OK, EXIT_USAGE, SPEC_HELP, _Usage, load_spec, pairs, refuse_twice


def cmd_validate(args: argparse.Namespace) -> int:
    from ..api._specs import validate

    report = validate(*args.paths)
    for check in report.files:
        for diag in check.diagnostics:
            print(diag, file=sys.stderr)
        if not check.ok:
            print(f"{check.path}: {check.summary()}", file=sys.stderr)
            continue
        for problem in check.warnings:
            print(f"{check.path}: warning: {problem}", file=sys.stderr)
        if not args.quiet:
            print(f"{check.path}: ok: {check.summary()}")
    return report.exit_code


def cmd_render(args: argparse.Namespace) -> int:
    from ..api._specs import render
    from ..errors import UsageError
    from ..spec import InputError, RenderError

    try:
        spec = load_spec(args.spec)
    except UsageError as exc:  # the spec's own diagnostics, FILE:LINE:COL first
        print(exc, file=sys.stderr)
        return EXIT_USAGE
    twice: list[str] = []
    given, outs = pairs(args.input, "--input", twice=twice), pairs(args.output, "--output", twice=twice)
    env = pairs(args.env, "--env", twice=twice) if args.env else None
    try:
        refuse_twice(twice, lambda: render(spec, inputs=given, outputs=outs, env=env))
        rendered = render(spec, inputs=given, outputs=outs, env=env)
    except (InputError, RenderError) as exc:
        print(f"{args.spec}: {exc}".replace("\n", f"\n{args.spec}: "), file=sys.stderr)
        return EXIT_USAGE
    # the line as the shell gets it; --json: the argv each rank executes (words, or sh -c LINE)
    print(json.dumps(list(rendered.argv)) if args.json else rendered.line)
    return EXIT_OK


def cmd_schema(args: argparse.Namespace) -> int:
    from ..api._specs import schema

    text = json.dumps(schema(args.dialect), indent=2) + "\n"
    if not args.out:
        sys.stdout.write(text)
        return EXIT_OK
    from ..base.files import write_atomic
    from ..core.owned import file_problem, mark_text

    why = file_problem(Path(args.out), None, args.force)  # only over what distcomp wrote, unless --force
    if why:
        raise _Usage(why)
    try:
        write_atomic(Path(args.out), mark_text(text, "distcomp schema") or text)
    except OSError as exc:
        raise _Usage(f"cannot write {args.out}: {exc.strerror or exc}") from None
    return EXIT_OK


def add_parsers(sub: "argparse._SubParsersAction[argparse.ArgumentParser]", argv: "Sequence[str]" = ()) -> None:
    p = sub.add_parser("validate", help="check spec files; exit 0 if all are valid, 2 otherwise",
                       description="Check spec files in any dialect. Errors go to stderr as FILE:LINE:COL: field: problem.")
    p.add_argument("paths", nargs="+", metavar="PATH", help="spec files, folders holding component.yaml files, or FILE.py:FUNCTION")
    p.add_argument("-q", "--quiet", action="store_true", help="print only problems")
    p.set_defaults(func=cmd_validate)

    p = sub.add_parser("render", help="print the command line a rank runs (each value one quoted word), for "
                                      "debugging templates",
                       description="Print the component's command line as the shell on each rank gets it: the "
                                   "author's text, each input and output value put in as one shell-quoted word. "
                                   "$NAME references are left to the rank's shell unless --env fills them. "
                                   "--json prints the argv each rank executes instead.")
    p.add_argument("spec", metavar="SPEC", help=SPEC_HELP)
    p.add_argument("--input", "-i", action="append", metavar="NAME=VALUE", help="an input value (repeatable)")
    p.add_argument("--output", "-o", action="append", metavar="NAME=PATH", help="an output path (default ./outputs/NAME)")
    p.add_argument("--env", action="append", metavar="NAME=VALUE",
                   help="show $NAME as one rank with this value would get it (repeatable)")
    p.add_argument("--json", action="store_true", help="print the argv as a JSON list")
    p.set_defaults(func=cmd_render)

    p = sub.add_parser("schema", help="print the JSON Schema of the DistributedComponent dialect")
    p.add_argument("--dialect", choices=("sdk", "v2", "draft"), default="sdk",
                   help="sdk: DistributedComponent (default); v2: azure-ai-ml command; draft: distributed job")
    p.add_argument("--out", metavar="FILE", help="write to FILE instead of stdout")
    p.add_argument("--force", action="store_true",
                   help="write --out over an existing file that distcomp did not write (never a registry or a system "
                        "folder)")
    p.set_defaults(func=cmd_schema)
