"""``distcomp run``: a component here, with real ranks (``distcomp.run``)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Sequence
import json
import sys
from pathlib import Path

from ._common import SPEC_HELP, _Usage, count, count_float, echo, pairs, positive, refuse_twice, seconds, speaker

if TYPE_CHECKING:
    from ..spec import ComponentSpec


def _inputs(args: argparse.Namespace, twice: list[str] | None = None) -> dict[str, str]:
    """``--input`` values, plus the ``--input-if-set`` ones whose value is not empty (a caller
    that cannot leave a flag out, such as an MLproject command, passes "" for "not given")."""
    given = pairs(args.input, "--input", twice=twice)
    for name, value in pairs(args.input_if_set, "--input-if-set", twice=twice).items():
        if name in given:
            raise _Usage(f"input {name} is given by both --input and --input-if-set")
        if value:
            given[name] = value
    return given


def cmd_run(args: argparse.Namespace) -> int:
    from ..api import run
    from ._common import check_status_file, load_spec

    if args.resume is not None:
        return _resume(args)
    if args.spec is None:
        raise _Usage("give the SPEC to run (or --resume RUN_DIR to go on with a job that ended)")
    if args.no_tracking and (args.system_metrics is True or args.experiment):
        raise _Usage("--no-tracking turns MLflow off; --experiment and --system-metrics need it on")
    spec = load_spec(args.spec)
    check_status_file(args.status_file, spec)
    twice: list[str] = []
    inputs, outputs, env = _inputs(args, twice), pairs(args.output, "--output", twice=twice), pairs(
        args.env, "--env", twice=twice)
    refuse_twice(twice, lambda: _check(spec, inputs, outputs, args.run_dir))
    outcome = run(spec, inputs=inputs, outputs=outputs,
                  nodes=args.nodes, nproc_per_node=args.nproc_per_node, run_dir=args.run_dir,
                  tracking=not args.no_tracking, experiment=args.experiment, timeout=args.timeout,
                  max_restarts=args.max_restarts, grace=5.0 if args.grace is None else args.grace,
                  system_metrics=args.system_metrics, system_metrics_interval=args.system_metrics_interval,
                  hang_timeout=args.hang_timeout,
                  env=env, console=None if args.quiet else echo, notify=speaker("run"))
    if args.status_file:
        _write_status(args.status_file, outcome.to_json())
    return outcome.exit_code if outcome.exit_code is not None else 1


# what a resumed job takes again: the rest is the first run's (the record distcomp kept)
_RESUME_TAKES = {"resume", "quiet", "status_file", "func", "command"}


def _resume(args: argparse.Namespace) -> int:
    from ..api import resume

    given = sorted(f"--{k.replace('_', '-')}" if k != "spec" else "SPEC" for k, v in vars(args).items()
                   if k not in _RESUME_TAKES and v not in (None, False, []))
    if given:
        raise _Usage(f"--resume goes on with the job as it was first run: {', '.join(given)} cannot be given again "
                     "(its spec, inputs, outputs and options are the first run's, which distcomp kept)")
    outcome = resume(args.resume, console=None if args.quiet else echo, notify=speaker("run"))
    if args.status_file:
        _write_status(args.status_file, outcome.to_json())
    return outcome.exit_code if outcome.exit_code is not None else 1


def _check(spec: "ComponentSpec", inputs: dict[str, str], outputs: dict[str, str], run_dir: str | None) -> None:
    """What ``run`` checks before it makes anything (``jobs.make_job``, which creates nothing)."""
    from ..core.jobs import default_run_dir, make_job

    cwd = Path.cwd()
    make_job(spec, inputs, outputs, Path(run_dir) if run_dir else default_run_dir(spec, cwd), cwd)


def _write_status(path: str, record: dict[str, object]) -> None:
    from ..base.files import write_atomic

    try:
        write_atomic(Path(path), json.dumps(record, indent=2) + "\n")
    except OSError as exc:
        print(f"distcomp: warning: cannot write the status file {path}: {exc.strerror or exc}", file=sys.stderr)


def add_parsers(sub: "argparse._SubParsersAction[argparse.ArgumentParser]", argv: "Sequence[str]" = ()) -> None:
    p = sub.add_parser("run", help="run a component here, with real ranks started by its launcher",
                       description="Run SPEC on this machine: every rank a real process with its launcher's "
                                   "contract; --nodes simulates several nodes. Exit 0 only if every rank succeeded.")
    p.add_argument("spec", metavar="SPEC", nargs="?", help=SPEC_HELP)
    p.add_argument("--resume", metavar="RUN_DIR",
                   help="go on with the job in RUN_DIR that ended without succeeding (preempted by SIGTERM, failed, "
                        "cancelled): its next attempt, in the same run folder and MLflow run, with what its ranks "
                        "saved in runtime.checkpoint_dir()")
    p.add_argument("--input", "-i", action="append", metavar="NAME=VALUE", help="an input value (repeatable)")
    p.add_argument("--input-if-set", action="append", metavar="NAME=VALUE",
                   help="like --input, but an empty VALUE means not given (for an optional input)")
    p.add_argument("--output", "-o", action="append", metavar="NAME=PATH",
                   help="where an output goes (default RUN_DIR/outputs/NAME)")
    p.add_argument("--env", action="append", metavar="NAME=VALUE",
                   help="a variable for every rank (repeatable; over the spec's environment_variables)")
    p.add_argument("--nodes", type=positive, metavar="N", help="nodes to simulate on this machine (default: the spec's)")
    p.add_argument("--nproc-per-node", type=positive, metavar="M", help="processes per node (default: the spec's)")
    p.add_argument("--run-dir", metavar="DIR", help="folder for logs, outputs and status.json (default ./runs/NAME-TIME-ID)")
    p.add_argument("--timeout", type=seconds, metavar="SECONDS", help="stop the job after this long (restarts included)")
    p.add_argument("--max-restarts", type=count, default=None, metavar="K",
                   help="start every rank again up to K times after a failure (default: the spec's launcher.max_restarts, else 0)")
    p.add_argument("--grace", type=count_float, metavar="SECONDS",
                   help="time between SIGTERM and SIGKILL when ranks are stopped (default 5)")
    p.add_argument("--quiet", "-q", action="store_true", help="do not copy rank output to the console (logs only), nor show the live line")
    p.add_argument("--no-tracking", action="store_true",
                   help="no MLflow run (default: one run per job in $MLFLOW_TRACKING_URI, else sqlite:///mlflow.db)")
    p.add_argument("--experiment", metavar="NAME", help="MLflow experiment of the run (default: the component name)")
    p.add_argument("--system-metrics", action=argparse.BooleanOptionalAction, default=None,
                   help="log every node's CPU, memory, disk, network (and GPU) metrics to the run as "
                        "system/<node>/... (default: on, or the spec's launcher.system_metrics)")
    p.add_argument("--system-metrics-interval", type=seconds, metavar="SECONDS",
                   help="seconds between two samples of each node (default 10)")
    p.add_argument("--hang-timeout", type=seconds, metavar="SECONDS",
                   help="end the job, with each rank's stack in the root cause, when no rank has made progress "
                        "for SECONDS (default: off, or the spec's launcher.hang_timeout)")
    p.add_argument("--status-file", metavar="FILE",
                   help="write the job's outcome (state, exit code, root cause, MLflow run) to FILE as JSON")
    from ._live import live_command

    p.set_defaults(func=live_command(cmd_run))  # a terminal's live line while the job runs (cli._live)
