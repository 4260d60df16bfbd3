"""The ``distcomp`` command. Imports stay light: heavy modules load inside the subcommand
that needs them, so ``distcomp validate`` starts in a fraction of a second."""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Mapping, Sequence

from . import __version__
from .errors import DistcompError, UsageError

if TYPE_CHECKING:
    from .jobs import Job
    from .records import Topology
    from .spec import ComponentSpec
    from .targets.local import RunResult
    from .tracking import JobRun
    from .tracking._monitors import Monitors

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


def _run_inputs(args: argparse.Namespace) -> dict[str, str]:
    """``--input`` values, plus the ``--input-if-set`` ones whose value is not empty (a caller
    that cannot leave a flag out, such as an MLproject command, passes "" for "not given")."""
    given = _pairs(args.input, "--input")
    for name, value in _pairs(args.input_if_set, "--input-if-set").items():
        if name in given:
            raise _Usage(f"input {name} is given by both --input and --input-if-set")
        if value:
            given[name] = value
    return given


def _volumes(values: Sequence[str] | None) -> dict[str, str]:
    """``CLAIM:PATH`` flags into claim -> mount path; a malformed one is a usage error."""
    out: dict[str, str] = {}
    for item in values or ():
        claim, sep, path = item.partition(":")
        if not sep or not claim or not path:
            raise _Usage(f"--volume {item!r}: expected CLAIM:PATH (a PersistentVolumeClaim and its mount path)")
        if claim in out:
            raise _Usage(f"--volume {claim} is given twice")
        out[claim] = path
    return out


class _Usage(UsageError):
    """A usage error the CLI itself finds (an option, a folder with no spec, ...)."""


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
    table = _launcher_table()
    for file in _expand(args.paths):
        result = check_file(file, table)
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
    from .registry import RegistryError, locate
    from .spec import InputError, RenderError, SpecError, bind_inputs, load

    try:
        spec = load(locate(args.spec, warn=_deprecated), _launcher_table())
    except (RegistryError, SpecError) as exc:
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


def _launcher_table() -> "Mapping[str, str]":
    """Every launcher name and alias the installed plugins provide (built-ins included)."""
    from .plugins import PluginError, get_plugin_manager

    try:
        return get_plugin_manager().alias_table()
    except PluginError as exc:
        raise _Usage(str(exc)) from None


def _load(path: str, launchers: "Mapping[str, str] | None" = None) -> "ComponentSpec":
    """The spec at ``path`` (a file, a folder holding component.yaml, or a registry reference
    such as ``name@latest``); every problem is printed and the command stops (exit 2)."""
    from .registry import RegistryError, locate
    from .spec import SpecError, load

    try:
        return load(locate(path, warn=_deprecated), _launcher_table() if launchers is None else launchers)
    except (RegistryError, SpecError) as exc:
        raise _Usage(str(exc)) from None


def _deprecated(message: str) -> None:
    """A deprecated registry version named exactly still loads; say so in one line."""
    print(f"distcomp: warning: {message}", file=sys.stderr)


def cmd_run(args: argparse.Namespace) -> int:
    from .jobs import create_outputs, default_run_dir, make_job
    from .plugins import get_plugin_manager
    from .redact import mask, secret_values
    from .spec import RenderError
    from .targets.local import LaunchError, RunDirBusy, RunOptions, claim, run_topology

    if args.no_tracking and (args.system_metrics or args.experiment):
        raise _Usage("--no-tracking turns MLflow off; --experiment and --system-metrics need it on")
    pm = get_plugin_manager()
    spec = _load(args.spec, _launcher_table()).with_overrides(nodes=args.nodes, processes_per_node=args.nproc_per_node)
    try:
        launcher = pm.launcher(spec.distribution.launcher)
        cwd = Path.cwd()
        run_dir = Path(args.run_dir) if args.run_dir else default_run_dir(spec, cwd)
        job = make_job(spec, _run_inputs(args), _pairs(args.output, "--output"), run_dir, cwd)
        RunOptions(job.run_dir, args.timeout, args.max_restarts, args.grace)  # checks the numbers
    except UsageError as exc:  # a bug (any other ValueError) is not the user's: it shows its traceback
        raise _Usage(str(exc).replace("\n", "\n  ")) from None
    try:
        topology = launcher.type.factory(spec)
    except Exception as exc:  # a plugin's factory: name it, do not crash
        print(f"distcomp run: launcher {launcher.type.name!r} from {launcher.provider} could not lay out "
              f"the job: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_FAILED
    try:  # one job per run folder, held before anything of the job exists (its MLflow run, its logs)
        held = claim(job.run_dir, job.job_id, args.grace)
    except RunDirBusy as exc:
        raise _Usage(str(exc)) from None
    secrets = secret_values(job.values)
    with held:  # released at the end; undone if the job never started (a tracking store out of reach)
        roles = ", ".join(f"{n} {r}" for r, n in topology.roles().items())
        say(f"{spec.ref}: {topology.launcher}, {topology.nodes} node(s) x {topology.processes_per_node} "
            f"process(es), world size {topology.world_size} ({roles})")
        tracking = None if args.no_tracking else _start_tracking(job, topology, cwd, args.experiment)
        record = {"mlflow": {"run_id": tracking.run.run_id, "experiment_id": tracking.run.experiment_id,
                             "tracking_uri": tracking.uri}} if tracking else {}
        options = RunOptions(job.run_dir, args.timeout, args.max_restarts, args.grace, not args.quiet, job.job_id,
                             env=tracking.env() if tracking else {"DISTCOMP_TRACKING": "off"}, record=record)
        say(f"run folder {_rel(job.run_dir)} (logs in {_rel(job.run_dir / 'logs')})")
        create_outputs(job)
        monitors = _start_monitors(tracking, topology, job.run_dir / "logs") if args.system_metrics else None
        try:
            result = run_topology(spec, topology, job.values, job.outputs, options, console=_echo, notify=say,
                                  claim=held)
        except (LaunchError, RenderError) as exc:
            say(f"failed: {mask(str(exc), secrets)}")
            _end_tracking(tracking, monitors, None, job.run_dir, mask(str(exc), secrets))
            return EXIT_FAILED
        except BaseException:  # distcomp itself was stopped outside the supervisor: end the run, then go
            _end_tracking(tracking, monitors, None, job.run_dir, "distcomp was stopped before the job ended",
                          "interrupted")
            raise
        if result.state == "succeeded":
            outs = ", ".join(f"{n}={_rel(Path(p))}" for n, p in result.outputs.items())
            say(f"succeeded in {result.wall_s:.1f} s" + (f" after {result.attempts - 1} restart(s)" if result.attempts > 1 else "")
                + (f"; outputs: {outs}" if outs else ""))
        elif result.state == "failed":
            assert result.root_cause is not None
            say(f"job failed: {result.root_cause.describe()}\nthe other processes were stopped; logs in "
                f"{_rel(result.run_dir / 'logs')}")
        else:
            say(result.message)
        _end_tracking(tracking, monitors, result, job.run_dir)
    return result.exit_code


def _echo(text: str) -> None:
    """Rank output to the console as soon as its batch is in the logs (see targets.local._output)."""
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:  # the reader went away (`| head`): stop echoing, and never fail at exit
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        raise


def _start_tracking(job: "Job", topology: "Topology", cwd: Path, experiment: str | None) -> "JobRun | None":
    """The job's MLflow run, before any rank starts; a store that cannot be used stops here."""
    import os

    from .tracking import TrackingError, describe, start_run

    try:
        tracking = start_run(job, topology, os.environ, cwd, experiment, notify=say)
    except TrackingError as exc:
        raise _Usage(f"MLflow tracking: {exc}") from None
    if tracking is not None:
        say(describe(tracking))
    return tracking


def _start_monitors(tracking: "JobRun | None", topology: "Topology", log_dir: Path) -> "Monitors | None":
    """One MLflow system-metrics monitor per node, named as MLflow's node id (node0, node1, ...)."""
    if tracking is None:
        return None
    from .tracking._monitors import start_monitors

    log_dir.mkdir(parents=True, exist_ok=True)
    return start_monitors(tracking.run.run_id, tracking.uri, [f"node{n}" for n in range(topology.nodes)], log_dir)


def _end_tracking(tracking: "JobRun | None", monitors: "Monitors | None", result: "RunResult | None",
                  run_dir: Path, error: str = "", state: str = "failed") -> None:
    problems = monitors.stop() if monitors is not None else []
    if tracking is not None:
        status, more = tracking.finish(result, run_dir / "logs", error, state)
        problems += more
        # the status the store holds: RUNNING when it did not take the job's end (the warnings say why)
        say(f"MLflow run {tracking.run.run_id}: " + ("left RUNNING, not ended" if status == "RUNNING" else status))
    for problem in problems:
        say(f"warning: {problem}")


def _kubeflow_manifest(args: argparse.Namespace, extra_env: "Mapping[str, str] | None" = None,
                       spec: "ComponentSpec | None" = None) -> dict:
    """The job manifest the compile flags describe (``extra_env``: e.g. the MLflow run's)."""
    from .plugins import PluginError, get_plugin_manager
    from .spec import InputError, RenderError, bind_inputs
    from .targets.kubeflow import CompileError, compile_job

    spec = spec or _kubeflow_spec(args)
    outs = _pairs(args.output_path, "--output-path")
    try:
        unknown = [n for n in outs if n not in spec.outputs]
        if unknown:
            raise InputError(f"unknown output '{unknown[0]}' (expected one of: {', '.join(spec.outputs) or 'none'})")
        # the pod's paths, not this machine's: port inputs are given as they are seen in the pod
        values = bind_inputs(spec, _pairs(args.input, "--input"), Path("/"))
        paths = {n: outs.get(n, f"/outputs/{n}") for n in spec.outputs}
        return compile_job(spec, values, paths, pm=get_plugin_manager(), image=args.image, name=args.name,
                           namespace=args.namespace, env={**_pairs(args.env, "--env"), **(extra_env or {})},
                           trainer_v2=args.trainer_v2, workdir=args.workdir, volumes=_volumes(args.volume))
    except (InputError, RenderError, CompileError, PluginError) as exc:
        raise _Usage(str(exc).replace("\n", "\n  ")) from None


def _kubeflow_spec(args: argparse.Namespace) -> "ComponentSpec":
    return _load(args.spec, _launcher_table()).with_overrides(nodes=args.nodes, processes_per_node=args.nproc_per_node)


def cmd_compile(args: argparse.Namespace) -> int:
    """A spec as what a platform runs; written whole or not at all."""
    if args.environment and args.target != "azureml":
        raise _Usage("--environment is for --target azureml; give the container with --image")
    if args.target == "kfp":
        return _compile_kfp(args)
    if args.target == "azureml":
        return _compile_azureml(args)
    if args.target == "mlflow":
        return _compile_mlflow(args)
    manifest = _kubeflow_manifest(args)
    import yaml

    text = yaml.safe_dump(manifest, sort_keys=False)
    if not args.out:
        sys.stdout.write(text)
        return EXIT_OK
    from ._files import write_atomic

    out = Path(args.out)
    try:
        write_atomic(out, text)
    except OSError as exc:
        raise _Usage(f"cannot write {out}: {exc.strerror or exc}") from None
    print(f"distcomp compile: wrote {manifest['kind']} {manifest['metadata']['name']} to {out}", file=sys.stderr)
    return EXIT_OK


def cmd_submit(args: argparse.Namespace) -> int:
    """Compile, create the Kubeflow job, wait for it; one MLflow run for the whole job."""
    import signal
    import tempfile

    from .targets.kubeflow import SubmitError, submit_and_wait

    spec = _kubeflow_spec(args)
    api = _kube_client(args.kubeconfig)
    with tempfile.TemporaryDirectory(prefix="distcomp-submit-") as tmp:
        tracking = None if args.no_tracking else _cluster_tracking(args, spec, Path(tmp))
        manifest = _kubeflow_manifest(args, tracking.env() if tracking else None, spec)
        namespace = args.namespace or "default"
        stopped_by: list[int] = []

        def stop(signum: int, frame: object) -> None:  # SIGTERM (a cancelled pipeline step) as Ctrl-C
            stopped_by.append(signum)
            raise KeyboardInterrupt

        previous = signal.signal(signal.SIGTERM, stop)
        try:
            outcome = submit_and_wait(manifest, api, namespace, timeout=args.timeout or 24 * 3600.0,
                                      poll=args.poll, notify=lambda m: print(f"distcomp submit: {m}", file=sys.stderr))
        except SubmitError as exc:
            print(f"distcomp submit: {exc}", file=sys.stderr)
            if tracking:
                tracking.finish(None, Path(tmp) / "logs", str(exc))
            return EXIT_FAILED
        finally:
            signal.signal(signal.SIGTERM, previous)
        logs = Path(tmp) / "logs"
        logs.mkdir()
        (logs / "leader.log").write_text(outcome.log, encoding="utf-8")
        state = {"Succeeded": "succeeded", "Failed": "failed", "TimedOut": "timed_out",
                 "Cancelled": "interrupted"}[outcome.state]
        print(f"distcomp submit: {outcome.kind} {outcome.namespace}/{outcome.name} {outcome.state} after "
              f"{outcome.wall_s:.0f} s: {outcome.reason}", file=sys.stderr)
        if outcome.state != "Succeeded" and outcome.log:
            tail = "\n".join("  " + line for line in outcome.log.splitlines()[-15:])
            print(f"distcomp submit: last lines of the leading pod's log:\n{tail}", file=sys.stderr)
        if tracking:
            status, problems = tracking.finish(None, logs, "" if state == "succeeded" else outcome.reason, state)
            print(f"distcomp submit: MLflow run {tracking.run.run_id}: {status}", file=sys.stderr)
            for problem in problems:
                print(f"distcomp submit: warning: {problem}", file=sys.stderr)
    if state == "interrupted":
        return 128 + (stopped_by[0] if stopped_by else signal.SIGINT)
    return {"succeeded": EXIT_OK, "failed": EXIT_FAILED, "timed_out": 124}[state]


def _kube_client(kubeconfig: str | None):  # type: ignore[no-untyped-def]
    """In a pod, its service account; elsewhere the kubeconfig (``--kubeconfig``, $KUBECONFIG)."""
    import os

    from kubernetes import client, config
    from kubernetes.config.config_exception import ConfigException

    try:
        if kubeconfig is None and os.environ.get("KUBERNETES_SERVICE_HOST"):
            config.load_incluster_config()
        else:
            config.load_kube_config(config_file=kubeconfig)
    except (ConfigException, OSError, TypeError) as exc:
        raise _Usage(f"no Kubernetes configuration ({exc}); pass --kubeconfig FILE or set KUBECONFIG") from None
    return client.ApiClient()


def _cluster_tracking(args: argparse.Namespace, spec: "ComponentSpec", tmp: Path) -> "JobRun | None":
    """The job's MLflow run, when the pods can reach the store: a server, not a local file."""
    import os

    from .jobs import Job
    from .plugins import get_plugin_manager
    from .spec import bind_inputs
    from .targets.kubeflow import job_name
    from .tracking import TrackingError, describe, start_run

    uri = os.environ.get("MLFLOW_TRACKING_URI", "")
    if not uri.startswith(("http://", "https://")):
        print("distcomp submit: MLflow tracking is off: the pods need a tracking server "
              "(MLFLOW_TRACKING_URI=http://...); --no-tracking silences this", file=sys.stderr)
        return None
    try:
        name = job_name(args.name, spec)
        values = bind_inputs(spec, _pairs(args.input, "--input"), Path("/"))
        topology = get_plugin_manager().launcher(spec.distribution.launcher).type.factory(spec)
        job = Job(spec, values, {}, tmp, name)
        tracking = start_run(job, topology, os.environ, Path.cwd(), args.experiment)
    except TrackingError as exc:
        raise _Usage(f"MLflow tracking: {exc}") from None
    except ValueError as exc:  # a bad name or input: compiling reports it in full
        raise _Usage(str(exc)) from None
    if tracking is not None:
        print(f"distcomp submit: {describe(tracking)}", file=sys.stderr)
    return tracking


def _refuse(args: argparse.Namespace, options: Sequence[str], message: str) -> None:
    """A usage error for the first of ``options`` (argparse dests) given to a target it does not
    apply to; ``message`` names it as ``{flag}``."""
    for dest in options:
        if getattr(args, dest):
            raise _Usage(message.format(flag="--" + dest.replace("_", "-")))


def _compile_kfp(args: argparse.Namespace) -> int:
    """A KFP v2 component file (one node: the step starts the ranks itself; several: it submits
    a Kubeflow job sharing ``--volume`` with the step)."""
    from .targets.kfp import KfpTargetError, compile_component

    if not args.out:
        raise _Usage("--target kfp writes a component file: give -o FILE")
    if Path(args.out).suffix not in (".yaml", ".yml"):  # what KFP's writer takes (else a ValueError)
        raise _Usage(f"--target kfp writes YAML: give -o a FILE ending in .yaml (got {args.out})")
    _refuse(args, ("input", "output_path", "env", "name", "namespace", "workdir", "trainer_v2"),
            "{flag} is for --target kubeflow; a KFP component takes its inputs in the pipeline")
    volumes = list(_volumes(args.volume).items())
    if len(volumes) > 1:
        raise _Usage("--target kfp takes one --volume: the claim the step shares with the pods of a multi-node job")
    try:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        path = compile_component(args.spec, args.out, nodes=args.nodes, nproc_per_node=args.nproc_per_node,
                                 image=args.image, shared_volume=volumes[0] if volumes else None)
    except (KfpTargetError, OSError) as exc:
        raise _Usage(str(exc).replace("\n", "\n  ")) from None
    print(f"distcomp compile: wrote KFP component {path}", file=sys.stderr)
    return EXIT_OK


def _compile_mlflow(args: argparse.Namespace) -> int:
    """An MLflow project folder: MLproject (the inputs as parameters), the spec and its code."""
    from .targets.mlflow import MlflowTargetError, compile_project

    if not args.out:
        raise _Usage("--target mlflow writes a project folder: give -o DIR")
    _refuse(args, ("input", "output_path", "env", "image", "name", "namespace", "workdir", "volume", "trainer_v2"),
            "{flag} does not apply to --target mlflow: the project's inputs are `mlflow run -P NAME=VALUE` "
            "parameters, and it runs in the environment of `mlflow run`")
    try:
        path = compile_project(args.spec, args.out, nodes=args.nodes, nproc_per_node=args.nproc_per_node)
    except MlflowTargetError as exc:
        raise _Usage(str(exc).replace("\n", "\n  ")) from None
    print(f"distcomp compile: wrote MLflow project {path}; run it with: mlflow run {shlex.quote(str(path))} "
          "-b distcomp --env-manager local -P NAME=VALUE", file=sys.stderr)
    return EXIT_OK


def _compile_azureml(args: argparse.Namespace) -> int:
    """An azure-ai-ml command component YAML, validated by azure-ai-ml before it is written."""
    from .targets.azureml import AzureMLTargetError, compile_component, compile_mapping, to_yaml

    _refuse(args, ("input", "output_path", "env", "name", "namespace", "workdir", "trainer_v2", "volume"),
            "{flag} does not apply to --target azureml: a component takes its inputs in the pipeline or job "
            "that uses it")
    if args.environment and args.image:
        raise _Usage("give --environment or --image, not both")
    options = dict(nodes=args.nodes, nproc_per_node=args.nproc_per_node, environment=args.environment,
                   image=args.image)
    try:
        if args.out:
            compiled = compile_component(args.spec, args.out, **options)
        else:  # stdout: code paths relative to the current folder
            compiled = compile_mapping(args.spec, Path.cwd(), **options)
            sys.stdout.write(to_yaml(compiled.component))
    except AzureMLTargetError as exc:
        raise _Usage(str(exc).replace("\n", "\n  ")) from None
    for note in compiled.notes:
        print(f"distcomp compile: note: {note}", file=sys.stderr)
    if args.out:
        c = compiled.component
        print(f"distcomp compile: wrote Azure ML command component {c['name']} ({c['distribution']['type']} "
              f"distribution, {c['resources']['instance_count']} instance(s)) to {args.out}", file=sys.stderr)
    return EXIT_OK


def cmd_launchers(args: argparse.Namespace) -> int:
    from .plugins import PluginError, get_plugin_manager

    try:
        launchers = get_plugin_manager().launchers()
    except PluginError as exc:
        raise _Usage(str(exc)) from None
    if args.json:
        print(json.dumps([{"name": item.type.name, "aliases": list(item.type.aliases), "provider": item.provider,
                           "description": item.type.description} for item in launchers.values()], indent=2))
        return EXIT_OK
    width = max(len(n) for n in launchers)
    for name, item in launchers.items():
        aliases = ", ".join(item.type.aliases) or "-"
        print(f"{name:<{width}}  provider: {item.provider}; aliases: {aliases}\n{'':<{width}}  {item.type.description}")
    return EXIT_OK


def cmd_registry(args: argparse.Namespace) -> int:
    """``distcomp registry publish|list|show|search|deprecate`` (see ``distcomp.registry``)."""
    from .registry import RegistryError
    from .registry._cli import run

    try:
        return run(args)
    except RegistryError as exc:
        raise _Usage(str(exc)) from None


def cmd_reap(args: argparse.Namespace) -> int:
    """Close the runs a dead ``distcomp run`` left ``running``; a live job is left alone."""
    from .targets.local import reap

    if args.lock_fd is not None:  # a job's watchdog: its supervisor died, the lock is already held
        for run_dir in args.run_dirs:
            print(f"distcomp reap: {run_dir}: {reap(Path(run_dir), args.grace, lock_fd=args.lock_fd, cookie=args.cookie).message}",
                  flush=True)
        return EXIT_OK
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


def say(message: str) -> None:
    """distcomp's own progress and reports go to stderr; rank output goes to stdout."""
    print("distcomp run: " + message, file=sys.stderr, flush=True)


def _rel(path: Path) -> str:
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def cmd_schema(args: argparse.Namespace) -> int:
    from .spec import json_schema

    text = json.dumps(json_schema(args.dialect, _launcher_table()), indent=2) + "\n"
    if args.output:
        Path(args.output).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return EXIT_OK


def _number(kind: type, minimum: float, what: str):  # type: ignore[no-untyped-def]
    def parse(text: str) -> float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
        if value < minimum or value != value:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}")
        return value
    return parse


_positive = _number(int, 1, "an integer >= 1")
_count = _number(int, 0, "an integer >= 0")
_count_float = _number(float, 0, "a number of seconds >= 0")
_seconds = _number(float, 1e-9, "a number of seconds > 0")


def _kubeflow_flags(p: argparse.ArgumentParser) -> None:
    """What a Kubeflow job is made of: shared by ``compile`` and ``submit``."""
    p.add_argument("--nodes", type=_positive, metavar="N", help="nodes (pods) of the job (default: the spec's)")
    p.add_argument("--nproc-per-node", type=_positive, metavar="M", help="processes per node (default: the spec's)")
    p.add_argument("--input", "-i", action="append", metavar="NAME=VALUE",
                   help="an input value (repeatable); a port input is a path inside the pod")
    p.add_argument("--output-path", action="append", metavar="NAME=PATH",
                   help="where an output goes inside the pod (default /outputs/NAME)")
    p.add_argument("--image", metavar="IMAGE", help="container image (default: the spec's environment image)")
    p.add_argument("--name", metavar="NAME", help="job name (default: from the component name)")
    p.add_argument("--namespace", metavar="NS", help="Kubernetes namespace (default: the current one)")
    p.add_argument("--env", action="append", metavar="NAME=VALUE",
                   help="an env variable for every pod (repeatable), e.g. MLFLOW_TRACKING_URI")
    p.add_argument("--workdir", metavar="DIR", help="the container's working folder (default: the image's)")
    p.add_argument("--volume", action="append", metavar="CLAIM:PATH",
                   help="mount PersistentVolumeClaim CLAIM at PATH in every pod (repeatable): shared storage")
    p.add_argument("--trainer-v2", action="store_true", help="a Kubeflow Trainer v2 TrainJob instead")


SPEC_HELP = ("a spec file (any dialect), a folder holding component.yaml, or a registry reference such as "
             "NAME@1.2.0, NAME@latest, NAME@^1.2 ($DISTCOMP_REGISTRY, else the user's registry)")


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
    p.add_argument("spec", metavar="SPEC", help=SPEC_HELP)
    p.add_argument("--input", "-i", action="append", metavar="NAME=VALUE", help="an input value (repeatable)")
    p.add_argument("--output", "-o", action="append", metavar="NAME=PATH", help="an output path (default ./outputs/NAME)")
    p.add_argument("--env", action="append", metavar="NAME=VALUE",
                   help="fill $NAME references (without --env they are shown as ${NAME})")
    p.add_argument("--json", action="store_true", help="print the argv as a JSON list")
    p.set_defaults(func=cmd_render)

    p = sub.add_parser("run", help="run a component here, with real ranks started by its launcher",
                       description="Run SPEC on this machine: every rank a real process with its launcher's "
                                   "contract; --nodes simulates several nodes. Exit 0 only if every rank succeeded.")
    p.add_argument("spec", metavar="SPEC", help=SPEC_HELP)
    p.add_argument("--input", "-i", action="append", metavar="NAME=VALUE", help="an input value (repeatable)")
    p.add_argument("--input-if-set", action="append", metavar="NAME=VALUE",
                   help="like --input, but an empty VALUE means not given (for an optional input)")
    p.add_argument("--output", "-o", action="append", metavar="NAME=PATH",
                   help="where an output goes (default RUN_DIR/outputs/NAME)")
    p.add_argument("--nodes", type=_positive, metavar="N", help="nodes to simulate on this machine (default: the spec's)")
    p.add_argument("--nproc-per-node", type=_positive, metavar="M", help="processes per node (default: the spec's)")
    p.add_argument("--run-dir", metavar="DIR", help="folder for logs, outputs and status.json (default ./runs/NAME-TIME-ID)")
    p.add_argument("--timeout", type=_seconds, metavar="SECONDS", help="stop the job after this long (restarts included)")
    p.add_argument("--max-restarts", type=_count, default=0, metavar="K", help="restart every rank up to K times after a failure")
    p.add_argument("--grace", type=_count_float, default=5.0, metavar="SECONDS",
                   help="time between SIGTERM and SIGKILL when ranks are stopped (default 5)")
    p.add_argument("--quiet", "-q", action="store_true", help="do not copy rank output to the console (logs only)")
    p.add_argument("--no-tracking", action="store_true",
                   help="no MLflow run (default: one run per job in $MLFLOW_TRACKING_URI, else sqlite:///mlflow.db)")
    p.add_argument("--experiment", metavar="NAME", help="MLflow experiment of the run (default: the component name)")
    p.add_argument("--system-metrics", action="store_true",
                   help="log CPU, memory (and GPU) metrics of every node to the run")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("compile", help="write what a platform runs: a KFP component, a Kubeflow training job, an Azure ML component",
                       description="Compile SPEC for a target, without running anything. kfp: a KFP v2 component "
                                   "file whose step starts the ranks of one node. kubeflow: a PyTorchJob "
                                   "(torch.distributed, deepspeed), MPIJob v2beta1 (mpi) or TFJob (tensorflow); "
                                   "--trainer-v2 for a Kubeflow Trainer TrainJob. azureml: an azure-ai-ml command "
                                   "component (distribution, resources.instance_count), checked by azure-ai-ml. "
                                   "mlflow: an MLflow project folder (MLproject, the spec, its code) that "
                                   "`mlflow run DIR -b distcomp` runs as a distributed job.")
    p.add_argument("spec", metavar="SPEC", help=SPEC_HELP)
    p.add_argument("--target", choices=("kfp", "kubeflow", "azureml", "mlflow"), required=True,
                   help="what to compile for")
    p.add_argument("--out", "-o", metavar="FILE", help="write to FILE instead of stdout (mlflow: a folder)")
    _kubeflow_flags(p)
    p.add_argument("--environment", metavar="azureml:NAME:VERSION",
                   help="azureml: the registered environment to run in (default: the spec's)")
    p.set_defaults(func=cmd_compile)

    p = sub.add_parser("submit", help="create a Kubeflow training job for SPEC and wait for it to end",
                       description="Compile SPEC as with `compile --target kubeflow`, create the job in the cluster "
                                   "(in a pod: its service account; else the kubeconfig), wait for Succeeded or "
                                   "Failed, and report the reason and the leading pod's log. Exit 0 succeeded, "
                                   "1 failed, 124 timed out; Ctrl-C or SIGTERM deletes the job (exit 130, 143).")
    p.add_argument("spec", metavar="SPEC", help=SPEC_HELP)
    p.add_argument("--target", choices=("kubeflow",), default="kubeflow", help="where to submit (kubeflow)")
    _kubeflow_flags(p)
    p.add_argument("--kubeconfig", metavar="FILE", help="kubeconfig file (default: in-cluster, else $KUBECONFIG)")
    p.add_argument("--timeout", type=_seconds, metavar="SECONDS", help="delete the job after this long (default 24 h)")
    p.add_argument("--poll", type=_count_float, default=10.0, metavar="SECONDS", help="status poll interval (10)")
    p.add_argument("--no-tracking", action="store_true", help="no MLflow run")
    p.add_argument("--experiment", metavar="NAME", help="MLflow experiment (default: the component name)")
    p.set_defaults(func=cmd_submit)

    p = sub.add_parser("reap", help="close the runs a killed `distcomp run` left running",
                       description="For each run folder whose status.json says running although its `distcomp "
                                   "run` is gone (killed, or its machine restarted): stop every process the job "
                                   "left, mark status.json failed and the job's MLflow run FAILED. A live job is "
                                   "left alone; a job of another host is only reported, unless --force. "
                                   "Exit 0, or 1 if an MLflow run could not be closed.")
    p.add_argument("run_dirs", nargs="*", metavar="RUN_DIR", help="run folders (default: every one under ./runs)")
    p.add_argument("--force", action="store_true",
                   help="also mark failed a job of another host (its processes there cannot be stopped from here)")
    p.add_argument("--grace", type=_count_float, default=5.0, metavar="SECONDS",
                   help="time between SIGTERM and SIGKILL for what a job left running (default 5)")
    p.add_argument("--lock-fd", type=int, help=argparse.SUPPRESS)  # a job's watchdog: the run folder's lock
    p.add_argument("--cookie", help=argparse.SUPPRESS)  # ... and the job it watched
    p.set_defaults(func=cmd_reap)

    p = sub.add_parser("launchers", help="list the launcher types, their aliases and providers")
    p.add_argument("--json", action="store_true", help="print them as JSON")
    p.set_defaults(func=cmd_launchers)

    p = sub.add_parser("schema", help="print the JSON Schema of the DistributedComponent dialect")
    p.add_argument("--dialect", choices=("sdk", "v2", "draft"), default="sdk",
                   help="sdk: DistributedComponent (default); v2: azure-ai-ml command; draft: distributed job")
    p.add_argument("--output", "-o", metavar="FILE", help="write to FILE instead of stdout")
    p.set_defaults(func=cmd_schema)

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
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except DistcompError as exc:  # the user's mistake (exit 2) or a job that could not run (exit 1)
        print(f"distcomp {args.command}: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("distcomp: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return EXIT_FAILED
