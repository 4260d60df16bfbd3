"""distcomp's Python API; the ``distcomp`` command is a thin layer over it.

>>> import distcomp
>>> spec = distcomp.load("examples/local/component.yaml")                     # doctest: +SKIP
>>> outcome = distcomp.run(spec, inputs={"epochs": "2"}, nproc_per_node=2)     # doctest: +SKIP
>>> outcome.state, outcome.tracking.run_id                                    # doctest: +SKIP
(<JobState.SUCCEEDED: 'succeeded'>, '5f0c...')
>>> job = distcomp.submit(spec, "local", inputs={"epochs": "2"})              # doctest: +SKIP
>>> job.wait().succeeded                                                      # doctest: +SKIP
True
>>> compiled = distcomp.compile(spec, "slurm", inputs={"epochs": "2"})        # doctest: +SKIP
>>> print(compiled.text)            # the sbatch script; submitting it runs that script # doctest: +SKIP
>>> job = distcomp.submit(compiled, experiment="mnist")                       # doctest: +SKIP

Errors are ``distcomp.errors`` exceptions carrying the message the CLI prints: ``UsageError``
for what the caller can fix (a bad spec, input or option), ``JobError`` for a job that could
not run. A job that ran comes back as a ``JobOutcome`` whatever its end.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping, Union

from ..errors import UsageError
from ..records import JobOutcome, JobState

if TYPE_CHECKING:
    from pathlib import Path

    from ..function import FunctionComponent

    from ..core.plugins import TargetPlugin
    from ..records import Plan
    from ..spec import ComponentSpec
    from ..core.target import Compiled, Notify, Target
    from ..targets.local import Resume

__all__ = ["JobHandle", "compile", "dryrun", "job", "load", "resume", "run", "submit"]

SpecRef = Union["ComponentSpec", "FunctionComponent", str, "os.PathLike[str]"]


def load(ref: "SpecRef", *, registry: str | None = None,
         warn: "Callable[[str], None] | None" = None) -> "ComponentSpec":
    """The spec at ``ref``: a spec file (any dialect), a folder holding component.yaml, a
    registry reference (``name@1.2.0``, ``name@latest``, ``name@^1.2``; ``registry`` or
    ``$DISTCOMP_REGISTRY``, else the user's registry), its hash checked, or a Python-function
    component (``@distcomp.component``, or ``FILE.py:FUNCTION``: the file is imported; its spec
    is read from its file in the user's cache, ``distcomp.function._filed``, its code folder
    the function's project). A ComponentSpec is returned as it is. Every problem raises a UsageError (SpecError: one
    diagnostic per line)."""
    from ..spec import ComponentSpec
    from ..spec import load as load_file

    if isinstance(ref, ComponentSpec):
        return ref
    from ..function._resolve import function_spec

    function = function_spec(ref)
    if function is not None:
        return function
    if not isinstance(ref, (str, os.PathLike)):
        raise UsageError(f"expected a ComponentSpec, a @distcomp.component, a spec path or a registry reference, got "
                         f"{type(ref).__name__}")
    from ..core.plugins import get_plugin_manager
    from ..registry import locate

    return load_file(locate(os.fspath(ref), registry, warn=warn), get_plugin_manager().alias_table())


def _spec(spec: "SpecRef", nodes: int | None, nproc_per_node: int | None) -> "ComponentSpec":
    for name, value in (("nodes", nodes), ("nproc_per_node", nproc_per_node)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise UsageError(f"{name} must be an integer >= 1 (got {value!r})")
    return load(spec).with_overrides(nodes=nodes, processes_per_node=nproc_per_node)


def run(spec: "SpecRef", *, inputs: Mapping[str, Any] | None = None, outputs: Mapping[str, str] | None = None,
        nodes: int | None = None, nproc_per_node: int | None = None, run_dir: "str | os.PathLike[str] | None" = None,
        tracking: bool = True, experiment: str | None = None, timeout: float | None = None, max_restarts: int | None = None,
        grace: float = 5.0, system_metrics: bool | None = None, system_metrics_interval: float | None = None,
        hang_timeout: float | None = None, env: Mapping[str, str] | None = None,
        console: Callable[[str], None] | None = None, notify: "Notify | None" = None) -> JobOutcome:
    """Run ``spec`` here with real ranks and wait for it (``distcomp run``). ``inputs``: values
    as on the command line (text, or numbers and booleans); ``console`` gets the ranks' output
    with its ``[rankN]`` prefixes, ``notify`` distcomp's progress lines (both: none by default;
    the logs are in the run folder either way); ``env``: variables for every rank;
    ``system_metrics`` (None: the spec's, else on), ``system_metrics_interval`` (seconds, default
    10) and ``hang_timeout`` (seconds, default off): what the job's watch does.

    It is ``submit(spec, "local", ...).wait()`` with the job run in this process: the core makes
    the job's plan, masker and MLflow run, the local target runs the job to its end, and the
    handle's wait ends the run once."""
    given = {"inputs": {k: _text(v) for k, v in (inputs or {}).items()}, "outputs": dict(outputs or {}),
             "run_dir": os.fspath(run_dir) if run_dir is not None else None, "timeout": timeout,
             "max_restarts": max_restarts, "grace": grace, "tracking": tracking, "experiment": experiment,
             "system_metrics": system_metrics, "system_metrics_interval": system_metrics_interval,
             "hang_timeout": hang_timeout, "env": dict(env or {})}
    return _run_here(spec, given, nodes, nproc_per_node, console, notify)


def resume(run_dir: "str | os.PathLike[str]", *, console: Callable[[str], None] | None = None,
           notify: "Notify | None" = None) -> JobOutcome:
    """Go on with the local job in ``run_dir`` that ended without succeeding (``distcomp run
    --resume``): its next attempt, with the same spec, inputs, outputs and options (its
    record, kept by distcomp), in the same run folder and MLflow run, its restart count one higher; its
    ranks find what they saved in ``runtime.checkpoint_dir()``."""
    from pathlib import Path

    from ..targets.local import kept_options, resumable

    folder = Path(run_dir).absolute()
    record, where = resumable(folder)
    assert record.spec is not None
    kept = kept_options(record)
    given = {"inputs": dict(record.inputs), "outputs": dict(record.outputs), "run_dir": str(folder),
             "env": dict(record.env), **{k: v for k, v in kept.items() if k not in ("nodes", "nproc_per_node")}}
    here = os.getcwd()
    if record.cwd:  # relative inputs are the first run's: its folder
        try:
            os.chdir(record.cwd)
        except OSError as exc:
            raise UsageError(f"--resume {folder}: cannot work in the first run's folder {record.cwd}: "
                             f"{exc.strerror or exc}") from None
    try:
        return _run_here(record.spec, given, kept.get("nodes"), kept.get("nproc_per_node"), console, notify, where)
    finally:
        os.chdir(here)


def _run_here(spec: "SpecRef", given: dict[str, Any], nodes: int | None, nproc_per_node: int | None,
              console: Callable[[str], None] | None, notify: "Notify | None",
              resumed: "Resume | None" = None) -> JobOutcome:
    """``run``'s body: the local target's submit, here, and the handle's wait."""
    from pathlib import Path
    from types import MappingProxyType

    from ..core.plan import make_plan, watching
    from ..core.submission import RESUME, submit as submit_job
    from ..core.target import Compiled
    from ..targets.local import HERE, Here, check_local, request_of

    found = _target("local", submitting=True)
    tracking, experiment, system_metrics = given.get("tracking", True), given.get("experiment"), given.get(
        "system_metrics")
    max_restarts = given.get("max_restarts")
    request = request_of(given)
    if not tracking and (system_metrics or experiment):  # said before any option is checked, as before
        raise UsageError("tracking is off; an experiment and system metrics need it on")
    bound = {**found.type.bind({k: v for k, v in given.items() if v is not None}, submitting=True),
             "nodes": nodes, "nproc_per_node": nproc_per_node}
    # the ranks inherit this process's environment: the advice reads it with the given variables
    plan = make_plan(_spec(spec, nodes, nproc_per_node), env={**os.environ, **request.env}, max_restarts=max_restarts,
                     **watching(given))
    check_local(plan, request, Path.cwd())  # every problem at once, as `distcomp run` words them
    say = notify or (lambda _m: None)
    instance = found.make()
    compiled = Compiled(kind=f"local run of {plan.spec.ref}", text="", target="local", plan=plan,
                        options=MappingProxyType(bound))

    def call(method: str, *args: Any) -> Any:
        return _call(found, method, *args, instance=instance)

    extra: dict[str, Any] = {HERE: Here(console, resumed)}
    if resumed is not None and resumed.tracking is not None and tracking:
        extra[RESUME] = resumed.tracking  # the core goes on in the job's run
    native, record = submit_job(found, instance, compiled, {**bound, **extra}, say, call)
    return JobHandle("local", native, instance, record).wait(notify=say)


def _text(value: Any) -> str:
    """An input value as the command line gives it (``True`` -> ``true``, as YAML writes it)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return os.fspath(value) if isinstance(value, os.PathLike) else str(value)


def _target(name: str, submitting: bool) -> "TargetPlugin":
    from ..core.plugins import get_plugin_manager

    found = get_plugin_manager().target(name)
    if submitting and not found.type.submits:
        runs = ", ".join(n for n, t in get_plugin_manager().targets().items() if t.type.submits)
        raise UsageError(f"target {name!r} compiles only; it does not submit (targets that do: {runs}); "
                         f"use `distcomp compile --target {name}`")
    return found


def compile(spec: "SpecRef", target: str, *, nodes: "int | str | None" = None, nproc_per_node: int | None = None,
            **options: Any) -> "Compiled":
    """What ``target`` runs for ``spec``, made without side effects (``distcomp compile``). A
    submitting target's Compiled can be submitted as it is: ``distcomp.submit(compiled)``.
    ``nodes``: a count, or ``"MIN:MAX"`` for a target with elastic jobs (``distcomp.target_nodes``)."""
    found = _target(target, submitting=False)
    count, options = _nodes(target, nodes, options)
    bound = {**found.type.bind(options, submitting=False), "nodes": count, "nproc_per_node": nproc_per_node}
    return _compiled(found, _spec(spec, count, nproc_per_node), bound)


def dryrun(spec: "SpecRef", target: str, *, nodes: "int | str | None" = None, nproc_per_node: int | None = None,
           **options: Any) -> "Compiled":
    """What ``submit`` would run, made without side effects (``distcomp submit --dryrun``;
    TorchX's ``dryrun``): the target's compile with every option ``submit`` takes.
    ``distcomp.submit(spec, target, **options)`` is ``distcomp.submit(distcomp.dryrun(...))``."""
    found = _target(target, submitting=True)
    count, options = _nodes(target, nodes, options)
    bound = {**found.type.bind(options, submitting=True), "nodes": count, "nproc_per_node": nproc_per_node}
    return _compiled(found, _spec(spec, count, nproc_per_node), bound, submitting=True)


def _nodes(target: str, nodes: "int | str | None", options: dict[str, Any]) -> tuple[int | None, dict[str, Any]]:
    """A count as it is; ``"MIN:MAX"`` as the target's ``elastic`` option, laid out for MAX."""
    if not isinstance(nodes, str):
        return nodes, options
    from ..core.nodes import target_nodes

    bound = target_nodes(target, nodes, options)
    return bound.nodes, dict(bound.options)


def _compiled(found: "TargetPlugin", spec: "ComponentSpec", bound: dict[str, Any],
              submitting: bool = False) -> "Compiled":
    """The target's compile of the job's one plan (made here: ``spec``, its overrides applied,
    and the variables its ranks get), holding what it was made from (so it can be submitted).
    Submitting, a bad input the compile refuses comes with every input path ``submit`` would
    refuse, so that one try names them all."""
    from dataclasses import replace
    from types import MappingProxyType

    from ..core.plan import make_plan, watching
    from ..core.submission import given_env
    from ..spec import InputError

    instance = found.make()
    gpu = _call(found, "has_gpu", spec, bound, instance=instance)
    plan = make_plan(spec, env=given_env(bound), gpu=gpu, max_restarts=bound.get("max_restarts"), **watching(bound))
    try:
        compiled = _call(found, "compile", plan, bound, instance=instance)
    except InputError as exc:
        ports = _port_problems(found, spec, bound) if submitting else []
        if not ports:
            raise
        raise InputError("\n".join([*str(exc).splitlines(), *ports])) from None
    return replace(compiled, target=found.type.name, plan=plan, options=MappingProxyType(bound))


def _warn(plan: "Plan | None", notify: "Notify") -> None:
    """The plan's warnings (the command's own launcher against the spec, a framework that would
    misbehave), one ``warning:`` line each: what every target's job deserves to be told."""
    for note in plan.warnings if plan is not None else ():
        notify(f"warning: {note}")


def _port_problems(found: "TargetPlugin", spec: "ComponentSpec", options: Mapping[str, Any]) -> list[str]:
    """Where the ranks read this machine's files: the port inputs that are no usable path here."""
    from pathlib import Path

    from ..core.jobs import port_problems
    from ..spec import check_inputs

    if not found.type.shares_files:
        return []
    values, _ = check_inputs(spec, {str(k): _text(v) for k, v in dict(options.get("inputs") or {}).items()}, Path.cwd())
    return port_problems(spec, values)


def submit(spec: "SpecRef | Compiled", target: str | None = None, *, nodes: "int | str | None" = None,
           nproc_per_node: int | None = None, notify: "Notify | None" = None, **options: Any) -> "JobHandle":
    """Start ``spec`` on ``target`` and return at once with its handle (``distcomp submit --detach``).

    ``spec`` may be what ``distcomp.compile`` or ``distcomp.dryrun`` returned: that very job is
    submitted, and ``options`` may then hold only the target's submit-only ones (``tracking``,
    ``experiment``, where its cluster is...). Either way the target submits one Compiled, binding
    only the job's MLflow run env, name and secrets (``Compiled.late``). The core, not the
    target, makes the job's plan, masker and MLflow run (created before the target submits,
    ended by the handle once the job ends): see ``distcomp.core.target``."""
    from ..core.submission import submit as submit_job
    from ..core.target import Compiled

    if not isinstance(spec, Compiled):
        if target is None:
            raise UsageError("distcomp.submit(spec, target, ...): name the target (or give what distcomp.compile "
                             "returned)")
        spec = dryrun(spec, target, nodes=nodes, nproc_per_node=nproc_per_node, **options)
        options, nodes, nproc_per_node = {}, None, None  # compiled in
    compiled = spec
    if compiled.plan is None or not compiled.target:
        raise UsageError(f"{compiled.kind}: submit what distcomp.compile or distcomp.dryrun returned (this Compiled "
                         "does not say what it was compiled from)")
    if target is not None and target != compiled.target:
        raise UsageError(f"{compiled.kind} was compiled for target {compiled.target!r}, not {target!r}")
    if nodes is not None or nproc_per_node is not None:
        raise UsageError(f"{compiled.kind} is compiled for its nodes and processes: give nodes and nproc_per_node "
                         "to distcomp.compile")
    found = _target(compiled.target, submitting=True)
    bound = _submit_options(found, compiled, options)
    ports = _port_problems(found, compiled.plan.spec, compiled.options)
    if ports:  # before anything of the job exists: its folder, its MLflow run
        from ..spec import InputError

        raise InputError("\n".join(ports))
    say = notify or (lambda _m: None)
    _warn(compiled.plan, say)
    instance = found.make()  # kept by the handle: it may remember how to reach the job

    def call(method: str, *args: Any) -> Any:
        return _call(found, method, *args, instance=instance)

    native, record = submit_job(found, instance, compiled, bound, say, call)
    return JobHandle(compiled.target, native, instance, record)


def _submit_options(found: "TargetPlugin", compiled: "Compiled", given: Mapping[str, Any]) -> dict[str, Any]:
    """The options of ``compiled``'s submit: what it was compiled with, and the submit-only ones
    given now (those it was compiled without take their defaults); an option that changes what
    was compiled is refused."""
    compiled_in = sorted(name for name in given if (o := found.type.option(name)) is not None and not o.submit_only)
    if compiled_in:
        raise UsageError(f"{compiled.kind}: {', '.join(map(repr, compiled_in))} changes what is compiled; give it to "
                         "distcomp.compile (or distcomp.submit(spec, target, ...))")
    from ..core.target import COMMON

    # checked again with the rest: a Compiled made by hand holds what its maker gave
    bound = found.type.bind({**{k: v for k, v in compiled.options.items() if k not in COMMON}, **given},
                            submitting=True)
    return {**bound, **{k: compiled.options.get(k) for k in COMMON}}


def _call(found: "TargetPlugin", method: str, *args: Any, instance: "Target | None" = None) -> Any:
    """A target's method; an error that is not distcomp's names the target and its provider."""
    from ..errors import DistcompError, JobError

    try:
        return getattr(instance if instance is not None else found.make(), method)(*args)
    except (DistcompError, KeyboardInterrupt):
        raise
    except Exception as exc:
        if found.provider == "distcomp":  # our own bug: its traceback is the report
            raise
        raise JobError(f"target {found.type.name!r} from {found.provider} failed to {method}: "
                       f"{type(exc).__name__}: {exc}") from exc


def job(job_id: str) -> "JobHandle":
    """The handle of a submitted job: ``TARGET:ID`` as ``submit`` printed it, or a local run folder."""
    from ..core.plugins import get_plugin_manager

    name, sep, native = job_id.partition(":")
    if sep and name in get_plugin_manager().targets():
        _target(name, submitting=True)
        return JobHandle(name, native)
    if os.path.isdir(job_id):
        return JobHandle("local", os.path.abspath(job_id))
    known = ", ".join(n for n, t in get_plugin_manager().targets().items() if t.type.submits)
    raise UsageError(f"{job_id!r} names no job: give TARGET:ID as `distcomp submit` printed it (targets: {known}), "
                     "or a local run folder")


@dataclass(frozen=True)
class JobHandle:
    """A submitted job: ask its target for its status, logs, end, or to cancel it.

    Every outcome it returns has the job's secrets masked and names the job's MLflow run; the
    first one that shows the job ended also ends that run (in whichever process asks). Where a
    run cannot be ended (its store does not answer), ``notify`` hears it, else stderr."""

    target: str
    id: str
    instance: "Target | None" = field(default=None, compare=False, repr=False)  # the target object that submitted it
    record: "Path | None" = field(default=None, compare=False, repr=False)  # the core's record of the job

    def __str__(self) -> str:
        return f"{self.target}:{self.id}"

    def _found(self) -> "TargetPlugin":
        return _target(self.target, submitting=True)

    def _ask(self, method: str, *args: Any) -> Any:
        found = self._found()
        if self.instance is None:
            object.__setattr__(self, "instance", found.make())
        return _call(found, method, *args, instance=self.instance)

    def _settled(self, outcome: JobOutcome, notify: "Notify | None") -> JobOutcome:
        from ..core.submission import settle

        assert self.instance is not None  # made by the _ask that got the outcome
        return settle(str(self), self.instance, outcome, self.record, notify)

    def status(self, notify: "Notify | None" = None) -> JobOutcome:
        return self._settled(self._ask("status", self.id), notify)

    def logs(self, rank: int | None = None, follow: bool = False) -> Iterator[str]:
        """Lines of the job's logs (one rank's with ``rank``); ``follow``: until the job ends.
        The job's secrets are masked in them."""
        from ..core.submission import masker_of

        lines: Iterator[str] = self._ask("logs", self.id, rank, follow)
        masker = masker_of(str(self), self.record, self.instance)
        return (masker.text(line) for line in lines) if masker else lines

    def cancel(self, notify: "Notify | None" = None) -> JobOutcome:
        return self._settled(self._ask("cancel", self.id), notify)

    def wait(self, timeout: float | None = None, poll: float = 1.0,
             notify: "Notify | None" = None) -> JobOutcome:
        """Block until the job ends (or ``timeout`` seconds: its outcome so far). The target's
        ``wait`` is asked; one that has none of its own (it answers None) has its status polled."""
        waited = self._ask("wait", self.id, timeout, notify or (lambda _m: None))
        if waited is not None:
            return self._settled(waited, notify)
        deadline = None if timeout is None else time.monotonic() + timeout
        seen: JobState | None = None
        while True:
            outcome = self.status(notify)
            if outcome.state is not seen and notify is not None:
                notify(outcome.summary())
            seen = outcome.state
            if outcome.done or outcome.state is JobState.UNKNOWN or (deadline is not None and time.monotonic() >= deadline):
                return outcome
            time.sleep(poll)
