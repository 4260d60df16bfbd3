"""The target contract: what a place that runs a job provides (``distcomp_targets`` hook).

Modelled on TorchX's schedulers: compiling (``submit_dryrun``) is apart from submitting
(``schedule``), and a submitted job is asked for its status (``describe``), its logs
(``log_iter``) and to stop (``cancel``) by an id the target understands. Options are declared
as records (TorchX's ``runopts``) so the CLI builds each target's own flags and the Python API
checks keyword arguments against the same list.

A target is a ``Target``: the object the ``TargetType.factory`` makes, a subclass that
overrides ``compile`` and, for a target that runs jobs, ``submit``, ``status``, ``logs`` and
``cancel``; every other method has a default (each method's doc says what it may raise)::

    class MyTarget(Target):
        def compile(self, plan, options) -> Compiled: ...
        def submit(self, job: JobContext, options, notify) -> str: ...   # the job's id
        def status(self, job_id) -> JobOutcome: ...
        def logs(self, job_id, rank, follow) -> Iterator[str]: ...   # lines, with their newline
        def cancel(self, job_id) -> JobOutcome: ...

A factory that makes an object of another class (a plugin written before ``Target`` existed:
``compile(spec, options)``, ``submit(spec, options, notify, job)``) gets it wrapped once, where
the plugin manager makes targets (``TargetPlugin.make``): each method is handed ``plan.spec``.

**The core makes the Plan once** (``distcomp.core.plan.make_plan``: the spec with the nodes and
processes overrides, its Topology and the warnings the job deserves), when it compiles, and
hands it to the target's ``compile``; the ``Compiled`` carries it (``Compiled.plan``), and the
commands show its warnings for every target alike. No target makes a plan of its own.

**Compile once, submit what was compiled** (TorchX's ``schedule(submit_dryrun(...))``):
``distcomp.submit(spec, target, **options)`` is ``distcomp.submit(distcomp.dryrun(spec, target,
**options))``: the core calls the target's ``compile`` once, with every option, and submits that
``Compiled`` (``distcomp.submit(distcomp.compile(...), **submit_only_options)`` works too). The
target's ``submit`` finds it as ``job.compiled`` and submits it as it is, binding only what
cannot exist before the submit: the job's MLflow run env (``job.env``), its name (``job.name``)
and its secrets file; ``Compiled.late`` says where each goes (``JOB_NAME`` is the placeholder
of the job's name in a compiled text). So what ``distcomp compile`` printed is what runs. An
option that changes what ``compile`` makes is therefore never ``submit_only``.

**What the core does around a target** (``distcomp.submit``; the job handle): it binds the
``inputs`` option, builds the job's one ``Masker`` (``distcomp.base.redact``) and, unless
``tracking=False`` (``--no-tracking``: every submitting target takes ``tracking`` and
``experiment``), **creates the job's MLflow run before** ``submit``. ``submit`` gets all of it
as a ``JobContext``: ``job.env`` holds what every rank needs to log into the run
(``MLFLOW_RUN_ID``, ``MLFLOW_TRACKING_URI``, ``DISTCOMP_*``), so a target only passes
``job.env`` on to its ranks. A ``submit`` that raises ends the run FAILED with the masked
reason. When a status, cancel or wait the core makes shows the job ended, in this process or in
a later one (``distcomp status TARGET:ID``), the core ends the run once, with the outcome's
state, its masked root cause as the ``distcomp.failure`` tag and the job's logs as artifacts,
and shows the outcome with the job's secrets masked. A target writes no tracking code.

Methods with a default, which a target overrides where it has more to say: ``check`` (refuse a
job before anything of it exists), ``tracking_uri`` (the MLflow store its ranks reach),
``save_logs`` (the ended job's logs for its run), ``place`` (where a job id names one job),
``wait`` (block until the job ends) and ``has_gpu`` (whether the job's machines have a GPU,
for the plan's advice).

A target whose ranks and whose end share a folder on this machine (the local target's run
folder) says which with ``job_folder`` (before the run is made: its ranks report into
``FOLDER/tracking``) and ``ended_folder`` (the run's end reads ``FOLDER/logs`` and those
reports); every other target's run ends with what ``save_logs`` gathers into the core's own
job folder. ``JobOutcome.end_tags``: what only the target knows of the end (the local
target's attempts and failing process), tagged on the run as it ends.
``TargetType.shares_files``: the ranks see this
machine's files (on it, or a shared file system): they also get distcomp's MLflow hook on
their PYTHONPATH and report what they could not deliver into the job's folder.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Callable, Iterator, Literal, Mapping, cast

from ..errors import UsageError

if TYPE_CHECKING:
    from ..records import JobOutcome, Plan, TrackingRef
    from ..base.redact import Masker
    from ..spec import ComponentSpec

__all__ = ["JOB_NAME", "Compiled", "JobContext", "Notify", "OptionKind", "Target",
           "TargetOption", "TargetType"]

Notify = Callable[[str], None]
OptionKind = Literal["str", "int", "float", "bool", "pairs", "list"]
_OPTION = re.compile(r"^[a-z][a-z0-9_]*\Z")
_TARGET = re.compile(r"^[a-z][a-z0-9-]*\Z")
# the job's name in a compiled text, where the target names something after it (a job folder):
# the core makes the name when it submits, so each submit of one Compiled gets its own
JOB_NAME = "{{job_name}}"


@dataclass(frozen=True)
class TargetOption:
    """One option of a target: a keyword of ``distcomp.compile/submit`` and a CLI flag.

    ``kind``: ``str``, ``int``, ``float``, ``bool`` (a flag), ``list`` (a repeatable flag) or
    ``pairs`` (a repeatable ``NAME=VALUE`` flag, a mapping in Python; ``separator`` may be
    another character, e.g. ``:`` for ``CLAIM:PATH``). ``submit_only``: not used to compile:
    it changes nothing of what ``compile`` makes (how to reach the cluster, the MLflow run,
    how long to wait), so it may be given when a ``Compiled`` is submitted.
    ``minimum``: the smallest number an ``int``/``float`` takes. ``path``: the value (each
    value, for ``pairs``) is a path: ``"here"`` on the submitting machine (a relative one is read
    where the submit runs), ``"there"`` where the job runs (on nodes that see none of this
    machine's folders: it must be absolute); what relays an option (an MLflow backend config)
    reads it so. ``writes``: the job writes on that path (its outputs, the folder its own
    folder goes in): the core refuses, before anything of the job exists, a place no job may
    write (a system folder, a registry, the code folder: ``jobs.written_place_problems``), for
    every target alike.
    """

    name: str  # the Python keyword (``output_paths``); the flag is --output-paths unless ``flag`` says
    kind: OptionKind = "str"
    default: Any = None
    help: str = ""
    required: bool = False
    submit_only: bool = False
    flag: str = ""  # e.g. "--output-path"
    short: str = ""  # e.g. "-i"
    metavar: str = ""
    separator: str = "="
    minimum: float | None = None
    path: Literal["", "here", "there"] = ""
    writes: bool = False

    def __post_init__(self) -> None:
        if not _OPTION.match(self.name):
            raise UsageError(f"target option {self.name!r}: a name is lowercase letters, digits and _")
        if self.flag and not self.flag.startswith("--"):
            raise UsageError(f"target option {self.name!r}: its flag must start with -- (got {self.flag!r})")

    @property
    def cli_flag(self) -> str:
        return self.flag or "--" + self.name.replace("_", "-")

    def check(self, value: Any, target: str) -> Any:
        """``value`` as this option holds it (a tuple for ``list``, a mapping for ``pairs``),
        or a UsageError naming the option, the target and what it takes."""
        if value is None:
            return None
        where = f"target {target!r}: option {self.name!r}"
        kinds: dict[str, type | tuple[type, ...]] = {"str": str, "bool": bool, "int": int, "float": (int, float)}
        if self.kind in kinds:
            if isinstance(value, bool) and self.kind != "bool" or not isinstance(value, kinds[self.kind]):
                raise UsageError(f"{where} takes a {self.kind}, got {type(value).__name__} {value!r}")
            number = cast(float, value)
            if self.minimum is not None and self.kind in ("int", "float") and not number >= self.minimum:
                raise UsageError(f"{where} must be >= {self.minimum:g} (got {value!r})")
            return float(number) if self.kind == "float" else value
        if self.kind == "list":
            items = [value] if isinstance(value, str) else list(value)
            if not all(isinstance(v, str) for v in items):
                raise UsageError(f"{where} takes strings")
            return tuple(items)
        if not isinstance(value, Mapping) or not all(isinstance(k, str) and isinstance(v, (str, int, float))
                                                     for k, v in value.items()):
            raise UsageError(f"{where} takes a mapping of names to values (text, numbers or booleans)")
        # a value as the command line gives it: True -> "true", as YAML writes it
        return MappingProxyType({k: ("true" if v else "false") if isinstance(v, bool) else str(v)
                                 for k, v in value.items()})


@dataclass(frozen=True)
class TargetType:
    """A target: its name (``--target NAME``), what it is, its options and its factory.

    ``submits``: whether its targets can submit (``distcomp submit`` and the job commands take
    it); such a target takes ``tracking`` and ``experiment`` too (added when it does not declare
    them). ``job_ids``: a short note on the ids it gives, for ``distcomp targets``.
    ``shares_files``: see the module's doc.
    """

    name: str
    factory: Callable[[], "Target"]
    description: str = ""
    options: tuple[TargetOption, ...] = ()
    submits: bool = False
    job_ids: str = ""
    shares_files: bool = False

    def __post_init__(self) -> None:
        if not _TARGET.match(self.name):
            raise UsageError(f"target {self.name!r}: a name is lowercase letters, digits and -")
        seen: set[str] = set()
        for option in self.options:
            if not isinstance(option, TargetOption):
                raise UsageError(f"target {self.name!r}: options must be TargetOption records")
            if option.name in seen or option.name in COMMON:
                raise UsageError(f"target {self.name!r}: option {option.name!r} is declared twice "
                                 f"(or is one every target has: {', '.join(COMMON)})")
            seen.add(option.name)
        extra = tuple(o for o in (TRACKING, EXPERIMENT) if self.submits and o.name not in seen)
        object.__setattr__(self, "options", tuple(self.options) + extra)

    def option(self, name: str) -> TargetOption | None:
        return next((o for o in self.options if o.name == name), None)

    def bind(self, given: Mapping[str, Any], submitting: bool) -> dict[str, Any]:
        """Every option's value (given, else its default), checked; an unknown or missing
        one is a UsageError that names the target and the options it takes."""
        known = {o.name for o in self.options if submitting or not o.submit_only}
        unknown = sorted(set(given) - known)
        if unknown:
            names = ", ".join(sorted(known)) or "none"
            what = "submit" if submitting else "compile"
            raise UsageError(f"target {self.name!r} does not take {', '.join(map(repr, unknown))} to {what} "
                             f"(its options: {names})")
        out: dict[str, Any] = {}
        for option in self.options:
            if option.name not in known:
                continue
            value = option.check(given.get(option.name), self.name)
            if value is None:
                if option.required:
                    raise UsageError(f"target {self.name!r} needs {option.cli_flag} ({option.help or option.name})")
                value = option.default
            out[option.name] = value
        return out


# Options every target takes: applied to the spec before the target sees it, and passed in its
# options too (None when not given), for a target that bakes them into what it writes.
COMMON = ("nodes", "nproc_per_node")

# What every submitting target takes, read by the core (the job's MLflow run); a target may
# declare its own record of either, to say what it means there.
TRACKING = TargetOption("tracking", "bool", default=True, submit_only=True,
                        help="one MLflow run per job in $MLFLOW_TRACKING_URI, else sqlite:///mlflow.db")
EXPERIMENT = TargetOption("experiment", metavar="NAME", submit_only=True,
                          help="MLflow experiment of the run (default: the component name)")


@dataclass(frozen=True)
class JobContext:
    """What the core made of a job before its target submits it (``submit``'s ``job``)."""

    plan: "Plan"  # the spec with its overrides, its Topology and the job's warnings
    # what this target's ``compile`` made of the job with these options: what to submit, binding
    # only ``env``, ``name`` and the secrets
    compiled: "Compiled"
    values: Mapping[str, Any]  # the typed input values (the ``inputs`` option, bound)
    env: Mapping[str, str]  # what every rank needs: the job's MLflow run (empty when untracked)
    masker: "Masker"  # the job's secrets: mask what the target writes or shows
    name: str  # the job's name in the core, COMPONENT-TIME-XXXX (a target may use it for its own)
    tracking: "TrackingRef | None" = None  # the job's MLflow run, if tracked
    folder: Path | None = None  # the job's folder here, as the target's ``job_folder`` gave it
    record: Path | None = None  # the core's record of the job (``submission.settle`` takes it)


@dataclass(frozen=True)
class Compiled:
    """What a target compiled, before anything is written: the document (``text``: a manifest,
    a component file), and how it is written to a path the user gives (``writer``; default:
    ``text``, whole or not at all). A target whose output is a folder has a ``writer`` and may
    have no ``text``; one whose output depends on where it goes (relative code paths) writes
    it for that place."""

    kind: str  # what it is, for messages: "PyTorchJob mnist", "KFP component", "MLflow project"
    text: str | None = None
    writer: Callable[[Path], None] | None = None
    notes: tuple[str, ...] = ()  # what the user should know (shown on stderr)
    suffixes: tuple[str, ...] = ()  # what a file it is written to must end with (".yaml", ...)
    folder: bool = False  # it is written as a folder
    data: Any = None  # the compiled object itself (a manifest mapping, a component), for callers
    # what ``submit`` binds, one line each (where the job's name, its MLflow run env and its
    # secrets go): everything else of ``text`` is submitted as it is
    late: tuple[str, ...] = ()
    native: Any = field(default=None, compare=False, repr=False)  # the target's own record of it, for its submit
    # what it was compiled from, set by the core (``distcomp.compile``): ``distcomp.submit`` takes it
    target: str = ""
    plan: "Plan | None" = field(default=None, compare=False, repr=False)  # the core's, made once
    options: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}), compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.text is None and self.writer is None:
            raise UsageError(f"{self.kind}: a compiled job has a text or a writer")

    @property
    def spec(self) -> "ComponentSpec | None":
        """The spec it was compiled from (its plan's: overrides applied)."""
        return self.plan.spec if self.plan is not None else None

    def bind(self, name: str) -> str:
        """``text`` with the job's name in place of ``JOB_NAME``: the text a target that names
        something after the job (a job folder) submits."""
        assert self.text is not None
        return self.text.replace(JOB_NAME, name)

    def write_problem(self, path: "str | Path", force: bool = False) -> str | None:
        """Why ``write(path, force)`` would refuse ``path``, as the whole message, or None: asked
        before anything is said or written."""
        from .owned import file_problem, folder_problem

        out = Path(path)
        if self.suffixes and out.suffix not in self.suffixes:
            return f"{self.kind} is written to a file ending in {' or '.join(self.suffixes)} (got {out})"
        code = self.spec.code if self.spec is not None else None
        if self.folder:  # the target's writer says which folders it replaces (its own marker)
            why = folder_problem(out, code, force=False)
            return f"--out {out} {why}" if why else None
        return file_problem(out, self.spec, force)

    def write(self, path: "str | Path", force: bool = False) -> Path:
        """Write it to ``path`` (whole or not at all); a UsageError says why it cannot be. Only
        over what distcomp wrote (``distcomp.core.owned``): a file it wrote carries its mark, which
        is added here where the format allows a comment; ``force``: over another existing file
        too, but never the spec, a file of its code folder, a registry or a system folder."""
        from .owned import mark_file, mark_text

        out = Path(path)
        why = self.write_problem(out, force)
        if why:
            raise UsageError(why)
        by = f"distcomp compile --target {self.target}" if self.target else "distcomp compile"
        if self.writer is not None:
            self.writer(out)
            if not self.folder and out.is_file():
                mark_file(out, by)
            return out
        from ..base.files import write_atomic

        assert self.text is not None
        try:
            write_atomic(out, mark_text(self.text, by) or self.text)
        except OSError as exc:
            raise UsageError(f"cannot write {out}: {exc.strerror or exc}") from None
        return out


class Target(ABC):
    """A target's object (what ``TargetType.factory`` makes): ``compile`` is its own; the rest
    have defaults, those of a job's life (``submit``, ``status``, ``logs``, ``cancel``) saying
    that this target only compiles.

    What a method may raise: ``distcomp.errors.UsageError`` for what the user can fix (an
    option, an input, a cluster that is not configured; the CLI exits 2), ``JobError`` for a job
    that failed or could not start (exit 1). Any other exception from a third-party target is
    reported as a JobError naming the target and its provider; one from distcomp's own is a bug
    and shows its traceback."""

    # the name it is registered under, set by the plugin manager (``TargetPlugin.make``): messages say it
    target_name: str = ""

    @abstractmethod
    def compile(self, plan: "Plan", options: Mapping[str, Any]) -> Compiled:
        """What runs ``plan`` with these options (the target's own, checked, and ``nodes`` and
        ``nproc_per_node``, already in the plan), made without side effects: nothing is created
        anywhere. Raises UsageError for an input, option or spec it cannot compile."""

    def submit(self, job: JobContext, options: Mapping[str, Any], notify: Notify) -> str:
        """Submit ``job.compiled`` (made by this target's ``compile`` from ``job.plan``), binding
        only ``job.env``, ``job.name`` and the job's secrets; returns the job's id, which
        ``status``, ``logs`` and ``cancel`` take. ``options``: the compile's and the submit-only
        ones; ``notify`` hears progress lines. Raises UsageError (a cluster that refuses the
        job's settings) or JobError (it could not be submitted): the job's run then ends FAILED."""
        raise self._compiles_only("submit")

    def status(self, job_id: str) -> "JobOutcome":
        """Where the job stands now. Raises UsageError for an id this target does not know."""
        raise self._compiles_only("status")

    def logs(self, job_id: str, rank: int | None, follow: bool) -> Iterator[str]:
        """Lines of the job's logs, with their newlines (one rank's with ``rank``); ``follow``:
        until the job has ended. Raises UsageError for an unknown id or rank."""
        raise self._compiles_only("logs")

    def cancel(self, job_id: str) -> "JobOutcome":
        """Stop the job and return its outcome once it has ended. Raises UsageError for an
        unknown id, JobError when the job could not be stopped."""
        raise self._compiles_only("cancel")

    def wait(self, job_id: str, timeout: float | None, notify: Notify) -> "JobOutcome | None":
        """Block until the job ends (or ``timeout`` seconds: its outcome so far); ``notify``
        hears each change. None (the default): this target has no wait of its own, and the core
        polls ``status``. Raises as ``status`` does."""
        return None

    def check(self, plan: "Plan", options: Mapping[str, Any], compiled: Compiled) -> None:
        """Refuse the job before anything of it exists, its MLflow run included (a scheduler's
        own dry run of ``compiled``: ``sbatch --test-only``); raises UsageError (JobError: the
        scheduler does not answer). The default refuses nothing."""

    def tracking_uri(self, options: Mapping[str, Any], notify: Notify) -> str | None:
        """The MLflow store the job's ranks can reach: a URI; "" (the default): the default
        store, ``$MLFLOW_TRACKING_URI``, else ``sqlite:///mlflow.db`` in the current folder;
        None: none they can reach, the job runs untracked (say why with ``notify``)."""
        return ""

    def save_logs(self, job_id: str, folder: Path) -> None:
        """Write the ended job's logs into ``folder``, one file per rank or node (``rank0.log``):
        its MLflow run keeps them, masked, as ``logs/NAME``. The default: the lines of
        ``logs(job_id, None, False)`` as ``job.log``. An error leaves the run without logs."""
        with open(folder / "job.log", "w", encoding="utf-8", errors="replace") as out:
            for line in self.logs(job_id, None, False):
                out.write(line)

    def job_folder(self, plan: "Plan", options: Mapping[str, Any]) -> Path | None:
        """The folder on this machine that the job's ranks and its run's end share (the local
        target's run folder), asked before the job's run is made: the run's ``Job`` names it and
        the ranks report into ``FOLDER/tracking``; ``submit`` gets it as ``job.folder``. None
        (the default): the ranks share no folder with this machine."""
        return None

    def ended_folder(self, job_id: str) -> Path | None:
        """The folder of the ended job ``job_id`` its run's end reads: its logs in ``logs/``, its
        ranks' reports in ``tracking/``, its status.json. None (the default): the logs come from
        ``save_logs``. An error counts as None."""
        return None

    def place(self, job_id: str) -> str:
        """Where ``job_id`` names one job (a Slurm cluster's name, a Jobs API's address), for a
        scheduler whose ids repeat elsewhere: the core keys its record of the job by it, so a
        job of another cluster with the same id never gets this one's run or secrets. The
        default: "" (ids are unique). An error counts as ""."""
        return ""

    def has_gpu(self, spec: "ComponentSpec", options: Mapping[str, Any]) -> bool | None:
        """Whether the job's machines have a GPU, for the plan's advice (accelerate on a job
        without one). None (the default): the spec's resources say, else this machine (a job
        that runs here)."""
        return None

    def _compiles_only(self, method: str) -> UsageError:
        name = self.target_name or type(self).__name__
        return UsageError(f"target {name!r} only compiles: it has no {method} (`distcomp targets` lists the "
                          "targets that submit)")
