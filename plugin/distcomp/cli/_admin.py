"""``distcomp registry ...`` and ``distcomp reap``: the registry, and jobs a killed run left."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ._common import EXIT_FAILED, EXIT_OK, _Usage, count_float, rel as _rel


def cmd_registry(args: argparse.Namespace) -> int:
    """``distcomp registry publish|list|show|search|deprecate`` (see ``distcomp.registry``)."""
    from ..registry import RegistryError
    from ..registry._cli import run

    try:
        return run(args)
    except RegistryError as exc:
        raise _Usage(str(exc)) from None


def cmd_reap(args: argparse.Namespace) -> int:
    """Close the runs a dead ``distcomp run`` left ``running``; a live job is left alone."""
    from ..targets.local import reap

    if args.run_dirs:
        dirs = [Path(d) for d in args.run_dirs]
        bad = [d for d in dirs if not (d / "status.json").is_file()]
        if bad:
            raise _Usage("\n".join(f"{d}: not a run folder (no status.json in it); give folders that "
                                   "`distcomp run` made, or none for those under ./runs" for d in bad))
    else:
        base = Path.cwd() / "runs"
        dirs = sorted(d for d in base.iterdir() if (d / "status.json").is_file()) if base.is_dir() else []
    counts = {"closed": 0, "running": 0, "elsewhere": 0, "ended": 0}
    code = EXIT_OK
    for run_dir in dirs:
        report = reap(run_dir, args.grace, args.force)
        counts[report.outcome] += 1
        if report.outcome != "ended" or args.run_dirs:
            print(f"distcomp reap: {_rel(run_dir)}: {report.message}", flush=True)
        for problem in report.problems:
            print(f"distcomp reap: warning: {problem}", file=sys.stderr)
            code = EXIT_FAILED
    print(f"distcomp reap: {len(dirs)} run folder(s){'' if args.run_dirs else ' under ./runs'}: "
          f"{counts['closed']} closed, {counts['running']} running, {counts['elsewhere']} on another host, "
          f"{counts['ended']} already ended")
    return code



def add_parsers(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    p = sub.add_parser("reap", help="close the runs a killed `distcomp run` left running",
                       description="For each run folder whose status.json says running although its `distcomp "
                                   "run` is gone (killed, or its machine restarted): stop every process the job "
                                   "left, mark status.json failed and the job's MLflow run FAILED. A live job is "
                                   "left alone; a job of another host is only reported, unless --force. "
                                   "Exit 0, or 1 if an MLflow run could not be closed or a process would not stop.")
    p.add_argument("run_dirs", nargs="*", metavar="RUN_DIR", help="run folders (default: every one under ./runs)")
    p.add_argument("--force", action="store_true",
                   help="also mark failed a job of another host (its processes there cannot be stopped from here)")
    p.add_argument("--grace", type=count_float, default=5.0, metavar="SECONDS",
                   help="time between SIGTERM and SIGKILL for what a job left running (default 5)")
    p.set_defaults(func=cmd_reap)


    p = sub.add_parser("registry", help="publish components as name@version, find them, deprecate them",
                       description="The component registry: publish a spec and its code as NAME@VERSION "
                                   "(immutable, content-hashed); find it again as NAME@VERSION, NAME@latest or a "
                                   "range (NAME@^1.2, 'NAME@>=1.0,<2'), which every command taking a SPEC accepts.")
    actions = p.add_subparsers(dest="registry_command", metavar="ACTION")
    actions.required = True
    where = argparse.ArgumentParser(add_help=False)
    where.add_argument("--registry", metavar="LOCATION", help="a folder (local or shared), or SCHEME://... of a "
                       "store plugin (default: $DISTCOMP_REGISTRY, else ~/.local/share/distcomp/registry)")
    q = actions.add_parser("publish", parents=[where], help="store specs and their code folders")
    q.add_argument("specs", nargs="+", metavar="SPEC", help="a component.yaml or a folder holding one")
    q.add_argument("--allow-external-links", action="store_true", help="store a copy of the file a symbolic link "
                   "in the code folder leads to outside it (refused by default)")
    for action, help_text in (("list", "every component: latest version, version count"),
                              ("search", "components whose name, title, description or tags contain TEXT"),
                              ("show", "one version: inputs, outputs, hash, where it is stored, other versions")):
        q = actions.add_parser(action, parents=[where], help=help_text)
        if action == "search":
            q.add_argument("text", metavar="TEXT")
        if action == "show":
            q.add_argument("ref", metavar="NAME[@VERSION]", help="NAME (its latest), NAME@1.2.0, NAME@^1.2, ...")
        q.add_argument("--json", action="store_true", help="print JSON")
    q = actions.add_parser("deprecate", parents=[where], help="mark a version deprecated: latest and ranges skip it")
    q.add_argument("ref", metavar="NAME@VERSION")
    q.add_argument("--message", "-m", metavar="TEXT", help="why, and what to use instead")
    q.add_argument("--undo", action="store_true", help="remove the deprecation")
    p.set_defaults(func=cmd_registry)
