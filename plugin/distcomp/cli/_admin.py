"""``distcomp reap``: close the jobs a killed run left (``distcomp.reap``), each folder's outcome printed."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from ._common import count_float, rel as _rel

if TYPE_CHECKING:
    from typing import Sequence

    from ..targets.local import Reaped


def cmd_reap(args: argparse.Namespace) -> int:
    """Close the runs a dead ``distcomp run`` left ``running``; a live job is left alone."""
    from ..api._reap import reap

    def said(report: "Reaped") -> None:  # as each folder is done: a reap may wait out a grace per job
        if report.outcome != "ended" or args.run_dirs:
            print(f"distcomp reap: {_rel(report.run_dir)}: {report.message}", flush=True)
        for problem in report.problems:
            print(f"distcomp reap: warning: {problem}", file=sys.stderr)

    done = reap(*args.run_dirs, grace=args.grace, force=args.force, progress=said)
    counts = done.counts
    print(f"distcomp reap: {len(done.runs)} run folder(s){'' if args.run_dirs else ' under ./runs'}: "
          f"{counts['closed']} closed, {counts['running']} running, {counts['elsewhere']} on another host, "
          f"{counts['ended']} already ended")
    return done.exit_code


def add_parsers(sub: "argparse._SubParsersAction[argparse.ArgumentParser]", argv: "Sequence[str]" = ()) -> None:
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

