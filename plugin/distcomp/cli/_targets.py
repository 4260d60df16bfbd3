"""``distcomp compile|submit --target NAME`` with the target's own flags, ``status|logs|cancel
JOB`` for what a target submitted, and ``targets``/``launchers`` listings. Each target's flags
come from its ``TargetOption`` records (``distcomp.core.target``); nothing here names a target."""

from __future__ import annotations

import argparse
import json
import shlex
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

from ._common import (EXIT_FAILED, EXIT_OK, SPEC_HELP, _Usage, check_status_file, load_spec, number, pairs,
                      positive, refuse_twice, rel, speaker)

if TYPE_CHECKING:
    from ..core.nodes import NodeRange
    from ..api import JobHandle
    from ..records import JobOutcome
    from ..core.target import Compiled, TargetOption, TargetType


def chosen_target(argv: Sequence[str]) -> str | None:
    """The value of ``--target`` in ``argv`` (``--target X`` or ``--target=X``), if any."""
    for i, arg in enumerate(argv):
        if arg == "--target" and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith("--target="):
            return arg.partition("=")[2]
    return None


def _target_types() -> "dict[str, TargetType]":
    from ..core.plugins import PluginError, get_plugin_manager

    try:
        return {name: t.type for name, t in get_plugin_manager().targets().items()}
    except PluginError as exc:
        raise _Usage(str(exc)) from None


def _add_option(p: argparse.ArgumentParser, option: "TargetOption") -> None:
    taken = getattr(p, "_option_string_actions", {})  # a short flag the command has already stays its own
    flags = [option.cli_flag, *([option.short] if option.short and option.short not in taken else [])]
    default = f" (default {option.default})" if option.default not in (None, False, True, 0) else ""
    help_text = (option.help or option.name) + ("" if option.help and "default" in option.help else default)
    kw: dict[str, Any] = {"dest": option.name, "default": None, "help": help_text}
    if option.metavar and option.kind != "bool":
        kw["metavar"] = option.metavar
    if option.kind == "bool":
        # on by default, or by the spec when not given (None): --X and --no-X
        kw["action"] = argparse.BooleanOptionalAction if option.default is not False else "store_true"
    elif option.kind in ("list", "pairs"):
        kw["action"] = "append"
    elif option.kind in ("int", "float"):
        kind = int if option.kind == "int" else float
        low = option.minimum if option.minimum is not None else float("-inf")
        what = (f"an integer >= {low:g}" if kind is int else
                "a number > 0" if low and low < 1e-6 else f"a number >= {low:g}")
        kw["type"] = number(kind, low, what)
    p.add_argument(*flags, **kw)


def add_target_flags(p: argparse.ArgumentParser, target: "TargetType | None", submitting: bool) -> None:
    if target is None:
        return
    group = p.add_argument_group(f"options of --target {target.name}")
    for option in target.options:
        if submitting or not option.submit_only:
            _add_option(group, option)  # type: ignore[arg-type]


def target_values(args: argparse.Namespace, target: "TargetType", submitting: bool,
                  twice: list[str] | None = None) -> dict[str, Any]:
    """The target options the user gave (a NAME=VALUE flag as a mapping); defaults are the
    target's, filled in by ``TargetType.bind``; ``twice`` collects names given twice (``pairs``)."""
    out: dict[str, Any] = {}
    for option in target.options:
        if option.submit_only and not submitting:
            continue
        value = getattr(args, option.name, None)
        if value is None:
            continue
        if option.kind == "pairs":
            shape = "CLAIM:PATH (a PersistentVolumeClaim and its mount path)" if option.separator == ":" \
                else option.metavar or "NAME=VALUE"
            value = pairs(value, option.cli_flag, option.separator, shape, twice)
        out[option.name] = value
    return out


def node_count(text: str) -> "NodeRange":
    """``--nodes N``, or an elastic range ``MIN:MAX`` (``distcomp.nodes_range``)."""
    from ..core.nodes import nodes_range
    from ..errors import UsageError

    try:
        return nodes_range(text)
    except UsageError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def foreign_flags(extras: Sequence[str], target: str) -> None:
    """Flags left over after parsing: name the target that takes each one, if any does."""
    types = _target_types()
    for arg in extras:
        flag = arg.partition("=")[0]
        owners = [t.name for t in types.values() if t.name != target
                  for o in t.options if flag in (o.cli_flag, o.short)]
        if owners:
            raise _Usage(f"{flag} does not apply to --target {target}: it is an option of --target "
                         f"{' and --target '.join(owners)}; `distcomp compile --target {target} --help` lists "
                         "the options it takes")


def cmd_compile(args: argparse.Namespace) -> int:
    from ..core.nodes import target_nodes
    from ..api import compile

    say = speaker("compile")
    target = _target_types()[args.target]
    spec = load_spec(args.spec)
    twice: list[str] = []
    bound = target_nodes(args.target, args.nodes, target_values(args, target, submitting=False, twice=twice))
    refuse_twice(twice, lambda: compile(spec, args.target, nodes=bound.nodes, nproc_per_node=args.nproc_per_node,
                                        **bound.options))
    compiled = compile(spec, args.target, nodes=bound.nodes, nproc_per_node=args.nproc_per_node, **bound.options)
    refusal = compiled.write_problem(args.out, args.force) if args.out else None
    if refusal:  # one line, before any note: nothing is written
        raise _Usage(refusal)
    _warnings(compiled, say)
    for note in compiled.notes:
        if "{out}" not in note:
            say(f"note: {note}")
    if not args.out:
        if compiled.text is None:
            raise _Usage(f"--target {args.target} writes {'a folder' if compiled.folder else 'a file'}: give --out "
                         f"{'DIR' if compiled.folder else 'FILE'}")
        sys.stdout.write(compiled.text)
        return EXIT_OK
    out = compiled.write(args.out, force=args.force)  # only over what distcomp wrote, unless --force
    say(f"wrote {compiled.kind} to {rel(out)}")
    for note in compiled.notes:
        if "{out}" in note:
            say(note.format(out=shlex.quote(str(out))))
    return EXIT_OK


def cmd_submit(args: argparse.Namespace) -> int:
    """Submit; then print the job id and return (--detach), or wait for the end (Ctrl-C or
    SIGTERM cancels the job) and exit as ``distcomp run`` does."""
    from ..core.nodes import target_nodes
    from ..api import dryrun, submit

    say = speaker("submit")
    target = _target_types()[args.target]
    spec = load_spec(args.spec)
    check_status_file(args.status_file, spec)
    twice: list[str] = []
    bound = target_nodes(args.target, args.nodes, target_values(args, target, submitting=True, twice=twice))
    refuse_twice(twice, lambda: dryrun(spec, args.target, nodes=bound.nodes, nproc_per_node=args.nproc_per_node,
                                       **bound.options))
    if args.dryrun:
        return _dryrun(args, spec, bound.nodes, dict(bound.options), say)
    handle = submit(spec, args.target, nodes=bound.nodes, nproc_per_node=args.nproc_per_node, notify=say,
                    **bound.options)
    print(handle, flush=True)  # the job id, alone on stdout: what status, logs and cancel take
    if args.detach:
        say(f"submitted {handle}; follow it with `distcomp status|logs|cancel {handle}`")
        if args.status_file:
            write_status(args.status_file, handle.status(notify=say))
        return EXIT_OK
    return wait_and_report(handle, say, args.status_file, quiet=args.quiet)


def wait_and_report(handle: "JobHandle", say: Callable[[str], None], status_file: str | None,
                    quiet: bool = False) -> int:
    """Wait for a submitted job (Ctrl-C or SIGTERM, a cancelled pipeline step, cancels it), say
    its end, write ``status_file``; the exit code ``distcomp run`` would give. ``distcomp
    submit`` and the worker's ``submit`` record (the KFP step's) end the same way. In a
    terminal a live line shows the job's progress meanwhile, unless ``quiet``."""
    stopped_by: list[int] = []

    def stop(signum: int, frame: object) -> None:  # SIGTERM as Ctrl-C
        stopped_by.append(signum)
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        from ._live import live_wait

        with live_wait(handle, quiet):  # a terminal's live line while it waits (cli._live)
            outcome = handle.wait(notify=say)
    except KeyboardInterrupt:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second signal must not cut the cancelling short
        outcome = handle.cancel(notify=say)
        say(f"stopped while waiting: {outcome.summary()}")
        if status_file:
            write_status(status_file, outcome)
        return 128 + (stopped_by[0] if stopped_by else signal.SIGINT)
    finally:
        if signal.getsignal(signal.SIGTERM) is stop:
            signal.signal(signal.SIGTERM, previous)
    _report(outcome, say)
    if status_file:
        write_status(status_file, outcome)
    return outcome.exit_code if outcome.exit_code is not None else EXIT_FAILED


def _dryrun(args: argparse.Namespace, spec: Any, nodes: int | None, values: dict[str, Any], say: Any) -> int:
    """``submit --dryrun``: what submit would run, on stdout; nothing is created (TorchX's --dryrun)."""
    from ..api import dryrun

    compiled = dryrun(spec, args.target, nodes=nodes, nproc_per_node=args.nproc_per_node, **values)
    if compiled.text is None:
        raise _Usage(f"--target {args.target} compiles no text to show; `distcomp compile --target {args.target} "
                     "--out PATH` writes it")
    _warnings(compiled, say)
    for note in compiled.notes:
        if "{out}" not in note:
            say(f"note: {note}")
    for late in compiled.late:
        say(f"bound when submitted: {late}")
    sys.stdout.write(compiled.text)
    return EXIT_OK


def _warnings(compiled: "Compiled", say: Callable[[str], None]) -> None:
    """The job's plan's warnings, for every target (``distcomp submit`` says them as it submits)."""
    for note in compiled.plan.warnings if compiled.plan is not None else ():
        say(f"warning: {note}")


def _report(outcome: "JobOutcome", say: Any) -> None:
    say(outcome.summary())
    if outcome.root_cause and not outcome.succeeded:
        say("root cause:\n" + "\n".join("  " + line for line in outcome.root_cause.splitlines()))
    if outcome.tracking is not None:
        say(f"MLflow run {outcome.tracking.run_id} ({outcome.tracking.tracking_uri})")


def write_status(path: str, outcome: "JobOutcome") -> None:
    """``--status-file``: the outcome as JSON, whole or not at all."""
    from ..base.files import write_atomic

    try:
        write_atomic(Path(path), json.dumps(outcome.to_json(), indent=2) + "\n")
    except OSError as exc:
        raise _Usage(f"cannot write the status file {path}: {exc.strerror or exc}") from None


def cmd_status(args: argparse.Namespace) -> int:
    from ..api import job

    outcome = job(args.job).status(notify=speaker("status"))
    if args.json:
        print(json.dumps(outcome.to_json(), indent=2))
    else:
        print(outcome.summary())
        if outcome.root_cause and not outcome.succeeded:
            print("\n".join("  " + line for line in outcome.root_cause.splitlines()))
        progress = outcome.details.get("progress")
        if isinstance(progress, dict) and progress:
            from ..agent.progress import describe

            print("\n".join("  " + line for line in describe(progress)))
        if outcome.restarts:
            from ..core.restarts import describe_restarts

            print("\n".join("  " + line for line in describe_restarts(outcome.restarts)))
        for name, path in outcome.outputs.items():
            print(f"  output {name}: {rel(Path(path)) if path.startswith('/') else path}")
        if outcome.tracking is not None:
            print(f"  MLflow run {outcome.tracking.run_id} ({outcome.tracking.tracking_uri})")
    return EXIT_OK


def cmd_logs(args: argparse.Namespace) -> int:
    from ..api import job

    try:
        for line in job(args.job).logs(args.rank, args.follow):
            sys.stdout.write(line)
            sys.stdout.flush()
    except KeyboardInterrupt:  # Ctrl-C ends following, not the job
        return EXIT_OK
    return EXIT_OK


def cmd_cancel(args: argparse.Namespace) -> int:
    from ..api import job

    outcome = job(args.job).cancel(notify=speaker("cancel"))
    print(outcome.summary())
    return EXIT_OK


def cmd_targets(args: argparse.Namespace) -> int:
    return _list_plugins(args.json, "targets", lambda t: {
        "description": t.type.description, "submits": t.type.submits, "job_ids": t.type.job_ids,
        "options": [o.cli_flag for o in t.type.options],
        "line": f"compile and submit (job ids: {t.type.job_ids})" if t.type.submits else "compile"})


def cmd_launchers(args: argparse.Namespace) -> int:
    return _list_plugins(args.json, "launchers", lambda item: {
        "aliases": list(item.type.aliases), "description": item.type.description,
        "line": f"aliases: {', '.join(item.type.aliases) or '-'}"})


def _list_plugins(as_json: bool, what: str, facts: Callable[[Any], dict[str, Any]]) -> int:
    """``distcomp targets|launchers``: each installed record with its provider, as text or JSON
    (``facts``: a record's JSON fields, and ``line``, what the text says after its provider)."""
    from ..core.plugins import PluginError, get_plugin_manager

    try:
        records = getattr(get_plugin_manager(), what)()
    except PluginError as exc:
        raise _Usage(str(exc)) from None
    if as_json:
        rows = [{"name": name, "provider": r.provider, **facts(r)} for name, r in records.items()]
        print(json.dumps([{k: v for k, v in row.items() if k != "line"} for row in rows], indent=2))
        return EXIT_OK
    width = max(len(n) for n in records)
    for name, r in records.items():
        print(f"{name:<{width}}  provider: {r.provider}; {facts(r)['line']}\n{'':<{width}}  {r.type.description}")
    return EXIT_OK


def add_parsers(sub: "argparse._SubParsersAction[argparse.ArgumentParser]", argv: Sequence[str]) -> None:
    """The target commands; ``compile``/``submit`` get the flags of the target ``argv`` names."""
    command = argv[0] if argv else None
    named = chosen_target(argv) if command in ("compile", "submit") else None
    types = _target_types() if command in ("compile", "submit") else {}
    if named is not None and named not in types:
        from ..core.plugins import get_plugin_manager

        get_plugin_manager().target(named)  # raises: unknown target, with the known ones
    names = ", ".join(types) or "see `distcomp targets`"
    p = sub.add_parser("compile", help="write what a platform runs (a KFP component, a Kubeflow job, an Azure ML "
                                       "component, an MLflow project, ...), without running anything",
                       description="Compile SPEC for --target, without running or creating anything. Each target "
                                   "has its own options: `distcomp compile --target NAME --help` lists them; "
                                   "`distcomp targets` lists the targets.")
    p.add_argument("spec", metavar="SPEC", help=SPEC_HELP)
    p.add_argument("--target", required=True, metavar="NAME", help=f"what to compile for ({names})")
    p.add_argument("--out", metavar="FILE", help="write to FILE instead of stdout (a folder for a target "
                                                       "that writes one)")
    p.add_argument("--force", action="store_true",
                   help="write --out over an existing file that distcomp did not write (never the spec, a file of its "
                        "code folder, a registry or a system folder)")
    p.add_argument("--nodes", type=node_count, metavar="N",
                   help="nodes of the job (default: the spec's); MIN:MAX: an elastic range, where the target has one")
    p.add_argument("--nproc-per-node", type=positive, metavar="M", help="processes per node (default: the spec's)")
    if command == "compile":
        add_target_flags(p, types.get(named or ""), submitting=False)
    p.set_defaults(func=cmd_compile)

    submitters = ", ".join(n for n, t in types.items() if t.submits) or "see `distcomp targets`"
    p = sub.add_parser("submit", help="start SPEC on a target (a Kubeflow cluster, this machine in the background, "
                                      "...), then wait for its end or --detach",
                       description="Submit SPEC to --target and wait for it to end, reporting the root cause "
                                   "(exit 0 succeeded, 1 failed, 124 timed out; Ctrl-C or SIGTERM cancels the "
                                   "job: exit 130, 143), or print its id and return (--detach). The job id is "
                                   "printed alone on stdout; `distcomp status|logs|cancel JOB` take it.")
    p.add_argument("spec", metavar="SPEC", help=SPEC_HELP)
    p.add_argument("--target", required=True, metavar="NAME", help=f"where to submit ({submitters})")
    p.add_argument("--nodes", type=node_count, metavar="N",
                   help="nodes of the job (default: the spec's); MIN:MAX: an elastic range, where the target has one")
    p.add_argument("--nproc-per-node", type=positive, metavar="M", help="processes per node (default: the spec's)")
    p.add_argument("--detach", action="store_true", help="print the job id and return once it is submitted")
    p.add_argument("--quiet", "-q", action="store_true",
                   help="no live line while waiting (in a terminal it shows the elapsed time, ranks alive, the "
                        "latest step, rank 0's latest metric and the restarts of a local, Slurm or Ray job)")
    p.add_argument("--dryrun", action="store_true",
                   help="print what would be submitted (the compiled job, with the placeholders submit binds) "
                        "and exit: nothing is created")
    p.add_argument("--status-file", metavar="FILE",
                   help="write the job's outcome as JSON (state, exit code, root cause, outputs, MLflow run)")
    if command == "submit":
        add_target_flags(p, types.get(named or ""), submitting=True)
    p.set_defaults(func=cmd_submit)

    job_help = "TARGET:ID as `distcomp submit` printed it, or a local run folder"
    p = sub.add_parser("status", help="where a submitted job is: its state, root cause, outputs, MLflow run")
    p.add_argument("job", metavar="JOB", help=job_help)
    p.add_argument("--json", action="store_true", help="print the JobOutcome as JSON")
    p.set_defaults(func=cmd_status)

    p = sub.add_parser("logs", help="print a submitted job's logs")
    p.add_argument("job", metavar="JOB", help=job_help)
    p.add_argument("--rank", type=number(int, 0, "a rank >= 0"), metavar="N", help="only rank N's log")
    p.add_argument("--follow", "-f", action="store_true", help="go on printing until the job ends")
    p.set_defaults(func=cmd_logs)

    p = sub.add_parser("cancel", help="stop a submitted job (every rank), and end its MLflow run as KILLED")
    p.add_argument("job", metavar="JOB", help=job_help)
    p.set_defaults(func=cmd_cancel)

    p = sub.add_parser("targets", help="list the targets, what they do and their providers")
    p.add_argument("--json", action="store_true", help="print them as JSON")
    p.set_defaults(func=cmd_targets)

    p = sub.add_parser("launchers", help="list the launcher types, their aliases and providers")
    p.add_argument("--json", action="store_true", help="print them as JSON")
    p.set_defaults(func=cmd_launchers)


__all__ = ["add_parsers", "chosen_target", "foreign_flags", "wait_and_report", "write_status"]
