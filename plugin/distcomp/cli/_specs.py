"""``distcomp validate``, ``render`` and ``schema``: a spec on its own, nothing run."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Sequence

from ._common import EXIT_OK, EXIT_USAGE, SPEC_HELP, SPEC_NAMES, _Usage, launcher_table, load_spec, pairs


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
    from ..plan import make_plan
    from ..spec import check_file

    bad = 0
    table = launcher_table()
    for file in _expand(args.paths):
        result = check_file(file, table)
        for diag in result.diagnostics:
            print(diag, file=sys.stderr)
        if result.spec is None:
            bad += 1
            n = len(result.errors)
            print(f"{file}: invalid ({n} error{'s' * (n != 1)})", file=sys.stderr)
        else:
            spec, dist = result.spec, result.spec.distribution
            plan = make_plan(spec)
            for problem in plan.warnings:
                print(f"{file}: warning: {problem}", file=sys.stderr)
            if args.quiet:
                continue
            own, ppn = plan.own, dist.processes_per_node or 1
            if own is not None and not own.once:  # what really runs: the user's launcher's count
                ppn = own.processes_per_node or ppn
            how = f"; {own.describe()}" if own is not None else ""
            print(f"{file}: ok: {spec.ref} ({dist.launcher}, {dist.nodes} node{'s' * (dist.nodes != 1)}"
                  f" x {ppn} process{'es' * (ppn != 1)}{how})")
    return EXIT_USAGE if bad else EXIT_OK


def cmd_render(args: argparse.Namespace) -> int:
    from ..errors import UsageError
    from ..redact import job_masker
    from ..spec import InputError, RenderError, bind_inputs
    from ..spec._template import SHELL

    try:
        spec = load_spec(args.spec)
    except UsageError as exc:  # the spec's own diagnostics, FILE:LINE:COL first
        print(exc, file=sys.stderr)
        return EXIT_USAGE
    given = pairs(args.input, "--input")
    outs = pairs(args.output, "--output")
    unknown = [n for n in outs if n not in spec.outputs]
    try:
        if unknown:
            known = ", ".join(spec.outputs) or "none"
            raise InputError("\n".join(f"unknown output '{n}' (expected one of: {known})" for n in unknown))
        values = bind_inputs(spec, given, Path.cwd())
        paths = {n: str(Path(outs.get(n, Path("outputs") / n)).absolute()) for n in spec.outputs}
        env = pairs(args.env, "--env") if args.env else None
        argv = spec.render(values, paths)
        line = spec.shell_line(values, paths, env)
        if env and argv[:2] == list(SHELL):  # --env: as one rank with those values runs it
            argv = [*SHELL, line]
    except (InputError, RenderError) as exc:
        print(f"{args.spec}: {exc}".replace("\n", f"\n{args.spec}: "), file=sys.stderr)
        return EXIT_USAGE
    # the line as the shell gets it; --json: the argv each rank executes (words, or sh -c LINE); the
    # job's secrets masked, as compile and every log show them
    masker = job_masker(spec, values, env)
    print(json.dumps(masker.argv(argv)) if args.json else masker.text(line))
    return EXIT_OK


def cmd_schema(args: argparse.Namespace) -> int:
    from ..spec import json_schema

    text = json.dumps(json_schema(args.dialect, launcher_table()), indent=2) + "\n"
    if args.output:
        Path(args.output).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return EXIT_OK


def add_parsers(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    p = sub.add_parser("validate", help="check spec files; exit 0 if all are valid, 2 otherwise",
                       description="Check spec files in any dialect. Errors go to stderr as FILE:LINE:COL: field: problem.")
    p.add_argument("paths", nargs="+", metavar="PATH", help="spec files, or folders holding component.yaml files")
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
    p.add_argument("--output", "-o", metavar="FILE", help="write to FILE instead of stdout")
    p.set_defaults(func=cmd_schema)
