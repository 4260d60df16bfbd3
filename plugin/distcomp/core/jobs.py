"""A job before it starts: the spec with its overrides, typed inputs that exist, and output
paths under the run folder. Everything here is checked before any process starts."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Mapping

# the places no job may write (system folders, your home folder): the core's one rule, ``distcomp.base.places``
from ..base.places import protected
from ..spec import (ComponentSpec, InputError, SymlinkLoop, check_inputs, command_problems, is_uri, resolve_path,
                   unknown_outputs, utf8_problem)

__all__ = ["Job", "create_outputs", "default_run_dir", "job_base", "make_job", "place_problem", "port_problems", "status_file_problem",
           "written_place_problems"]

RUNS = "runs"  # the code folder's own runs/: where a run from inside it goes, and what packaging skips


@dataclass(frozen=True)
class Job:
    spec: ComponentSpec
    values: Mapping[str, Any]  # typed input values
    outputs: Mapping[str, str]  # output name -> absolute path
    run_dir: Path
    job_id: str = field(default="")


def job_base(cwd: Path) -> Path:
    """Where what a job puts relative to the current folder goes (its default run folder, a
    relative MLflow store): ``cwd``, unless it lies in a component registry, which no job may
    change (``cd REGISTRY/NAME/VERSION && distcomp run .``): then the user's data folder,
    ``$XDG_DATA_HOME/distcomp`` (default ``~/.local/share/distcomp``)."""
    from ..base.stores import inside_store

    if inside_store(cwd) is None:
        return cwd
    data = os.environ.get("XDG_DATA_HOME", "").strip() or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(os.path.abspath(data)) / "distcomp"


def default_run_dir(spec: ComponentSpec, base: Path) -> Path:
    """``runs/NAME-YYYYmmdd-HHMMSS-xxxx`` under ``job_base(base)``: unique, and sorted by time."""
    return job_base(base) / RUNS / f"{spec.name}-{time.strftime('%Y%m%d-%H%M%S')}-{os.urandom(2).hex()}"


def port_problems(spec: ComponentSpec, values: Mapping[str, Any]) -> list[str]:
    """Port inputs of a job whose ranks read this machine's files must be paths that exist and
    hold what the input declares: one line per one that does not."""
    problems = []
    for name, inp in spec.inputs.items():
        value = values.get(name)
        if not inp.is_port or value is None:
            continue
        if isinstance(value, str) and is_uri(value):
            problems.append(f"input '{name}': {value} is a URI; a local run reads local paths "
                            f"(download it and give --input {name}=PATH)")
            continue
        path = Path(value)
        try:
            if not path.exists():
                problems.append(f"input '{name}': {path} does not exist")
            elif inp.holds == "folder" and not path.is_dir():
                problems.append(f"input '{name}' is a folder ({inp.type}), but {path} is a file")
            elif inp.holds == "file" and not path.is_file():
                problems.append(f"input '{name}' is a file ({inp.type}), but {path} is a folder")
        except OSError as exc:  # a name too long, a folder that cannot be read, ...
            problems.append(f"input '{name}': {path} is not a usable path ({exc.strerror or exc})")
    return problems


def _creatable(path: Path) -> str | None:
    """Why ``path`` (which does not exist) cannot be made with its parents, or None."""
    for part in (path, *path.parents):
        if part.is_symlink() and not part.exists():  # mkdir stops at a link to nowhere
            return f"cannot be created: {part} is a broken symbolic link"
        if part.exists():
            return None if part.is_dir() else f"cannot be created: {part} is a file"
    return None


def place_problem(path: Path, code: Path, holds: str = "folder") -> str | None:
    """Why a job must not write ``path`` (a run folder or an output holding ``holds``), or None:
    a NUL byte, a symbolic link loop, the wrong kind of thing already there, a system folder
    or one inside the system's own trees, and the code folder or a folder holding it."""
    if "\0" in str(path):
        return "holds a NUL byte (\\0)"
    not_text = utf8_problem(str(path))  # a path MLflow and status.json could not record
    if not_text:
        return not_text
    try:
        return _place_problem(path, code, holds)
    except SymlinkLoop:
        return "is a symbolic link loop"
    except OSError as exc:  # a name too long, a folder that cannot be read, ...
        return f"is not a usable path ({exc.strerror or exc})"


def _place_problem(path: Path, code: Path, holds: str) -> str | None:
    # the places nothing of distcomp's may write (system, home, code folder; a registry is
    # asked before, with a fix of its own): the one rule, ``_places.protected``
    why = protected(path, code)
    if why:
        return why
    real = resolve_path(path)
    shown = "" if real == path else f" ({real})"
    if real.is_dir():
        return f"is an existing folder, not a file{shown}" if holds == "file" else None
    if real.exists():
        return f"is an existing file, not a folder{shown}" if holds == "folder" else None
    return _creatable(path)


def _in_registry(path: Path) -> str | None:
    """Why a job must not write ``path``, when it lies in a component registry, or None."""
    from ..base.places import in_registry

    store = in_registry(path)  # a NUL byte, a link loop: place_problem says so
    return None if store is None else f"is inside the component registry at {store}, which no job may change"


def _inside_code(path: Path, code: Path) -> str | None:
    """Why ``path`` (a place ``place_problem`` accepted) is inside the code folder, which is published
    and packaged with the component, or None; its own ``runs/`` folder is skipped by both."""
    real, code = resolve_path(path), code.resolve()
    if real.is_relative_to(code) and not real.is_relative_to(code / RUNS):
        return f"is inside the code folder {code}, which is published and packaged with the component"
    return None


def _run_dir_problems(run_dir: Path, code: Path, flag: str = "--run-dir", what: str = "run folder",
                      own: str = "a new folder of its own") -> list[str]:
    why, fix = _in_registry(run_dir), f"give {flag} a folder outside the registry"
    if why is None:
        why, fix = place_problem(run_dir, code), f"give {flag} {own}"
    if why is None:
        why = _inside_code(run_dir, code)
        fix = f"give {flag} a folder outside it, or under its {RUNS}/ folder"
    return [f"{what} {_show(run_dir)} {why}; {fix}"] if why else []


def written_place_problems(spec: ComponentSpec, outputs: Mapping[str, str], folders: Mapping[str, str],
                           cwd: Path, outputs_here: bool = True) -> list[str]:
    """The one output-path rule of every target whose job writes on this machine's paths (or a
    file system its nodes share), asked by the core before anything of the job exists: each
    folder the job's own folder goes in (``folders``: flag -> path, ``--run-dir``, ``--job-dir``)
    and each output given (``outputs``: name -> path; a relative one is read from ``cwd`` when
    ``outputs_here``, else it is the target's to refuse: its nodes want absolute paths). One
    line per problem: the place, why, what to do."""
    problems = []
    for flag, given in folders.items():
        path = Path(given)
        path = path if path.is_absolute() else cwd / path
        if flag == "--run-dir":  # the job's own folder, as make_job says it
            problems += _run_dir_problems(path, spec.code)
        else:  # a folder the job's own folder goes in (--job-dir): it may hold others
            problems += _run_dir_problems(path, spec.code, flag, flag.removeprefix("--").replace("-", " "),
                                          "a folder of its own")
    absolute = {n: str(p if p.is_absolute() else cwd / p) for n, p in ((n, Path(p)) for n, p in outputs.items())
                if n in spec.outputs and (outputs_here or p.is_absolute())}
    return problems + _output_problems(spec, absolute)


def status_file_problem(path: Path, spec: ComponentSpec, cwd: Path) -> str | None:
    """Why ``--status-file PATH`` must not be written, as the whole message, or None: the places an
    output file may not go (``place_problem``), the code folder's files and the spec itself. The
    CLI asks before anything starts, so a bad one costs no run."""
    path = path if path.is_absolute() else cwd / path
    fix = "give --status-file a file of its own outside the code folder"
    why = _in_registry(path)
    if why is not None:
        fix = "give --status-file a file outside the registry"
    else:
        why = place_problem(path, spec.code, "file")
    if why is None:
        try:
            if spec.source is not None and resolve_path(path) == spec.source.resolve():
                why = "is the spec itself"
            else:
                why = _inside_code(path, spec.code)
        except (SymlinkLoop, OSError):  # place_problem has resolved it already
            why = None
    return f"status file {_show(path)} {why}; {fix}" if why else None


def _show(path: str | Path) -> str:
    return str(path).replace("\0", "\\0")  # a NUL byte printed raw would cut the message short


def _output_problems(spec: ComponentSpec, outputs: Mapping[str, str]) -> list[str]:
    problems = []
    for name, path in outputs.items():
        holds = spec.outputs[name].holds
        why = _in_registry(Path(path))
        fix = f"give --output {name}=PATH outside the registry"
        if why is None:
            why = place_problem(Path(path), spec.code, holds)
            fix = f"give --output {name}=PATH naming {'a file' if holds == 'file' else 'a folder'} of its own"
        if why:
            problems.append(f"output '{name}' ({spec.outputs[name].type}) at {_show(path)} {why}; {fix}")
    return problems


def make_job(spec: ComponentSpec, given: Mapping[str, str], given_outputs: Mapping[str, str],
             run_dir: Path, cwd: Path, environ: Mapping[str, str] | None = None) -> Job:
    """Bind and check everything; raises InputError listing every problem. Creates nothing.
    ``environ`` (default: this process's) is what the ranks inherit, counted against ARG_MAX."""
    problems = unknown_outputs(spec, given_outputs)
    values, bad = check_inputs(spec, given, cwd)
    problems += bad
    problems += port_problems(spec, values)  # those that bound: a bad one elsewhere hides no missing path
    run_dir = run_dir if run_dir.is_absolute() else cwd / run_dir
    place = _run_dir_problems(run_dir, spec.code)
    outputs = {}
    for name in spec.outputs:
        path = Path(given_outputs[name]) if name in given_outputs else run_dir / "outputs" / name
        outputs[name] = str((cwd / path).absolute() if not path.is_absolute() else path)
    # a default output only fails because its run folder does: say that once
    place += _output_problems(spec, {n: p for n, p in outputs.items() if n in given_outputs or not place})
    problems += place
    if not problems:
        env = {**(os.environ if environ is None else environ), **spec.environment_variables}
        problems += command_problems(spec.render(values, outputs), env)
    if problems:
        raise InputError("\n".join(problems))
    return Job(spec, MappingProxyType(dict(values)), MappingProxyType(outputs), run_dir.absolute(),
               run_dir.name)


def create_outputs(job: Job) -> None:
    """Make each output's folder (or a file output's parent) before the ranks start; an output
    that may be a file or a folder and is an existing file is left as it is."""
    for name, path in job.outputs.items():
        target = Path(path)
        holds = job.spec.outputs[name].holds
        if holds == "file" or (holds == "any" and target.is_file()):
            target.parent.mkdir(parents=True, exist_ok=True)
        else:
            target.mkdir(parents=True, exist_ok=True)
