"""The backend config of ``mlflow run -b distcomp -c JSON``, and the job record it makes of the
entry point's filled-in command and the project's record.

MLflow adds its own keys to every backend config (env manager, synchronous, docker args,
storage dir, build image, docker auth); the rest must be distcomp's, checked here before any
run is created. Without ``"target"`` (or with ``"local"``) the job runs here, and the keys are
``KEYS``. ``"target": NAME``, NAME any installed target that submits (slurm, ray, kubeflow, a
third party's), submits the entry point's job there instead (a ``submit`` record to that
target, which waits): the keys are then that target's own declared options, checked as it
declares them, and the layout (``_keys``). A key of another target, one that only a run here
takes, an unknown one (with a did-you-mean) and a bad value are each reported, all at once.

The command is ``python -m distcomp.worker RECORD NAME=VALUE ...`` (``_mlproject``); anything
else is refused with what to do.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Mapping

from ...errors import UsageError
from ...core.jobrecord import JobRecord, bind_params, read_record
from ._errors import MlflowTargetError
from ._keys import LAYOUT, NOT_KEYS, check_value, keys_of, submitting_targets
from ._mlproject import WORKER

if TYPE_CHECKING:
    from ...core.target import TargetType

# distcomp's keys (the job record's options) -> what the value must be
KEYS = {
    "nproc_per_node": "an integer >= 1",
    "nodes": "an integer >= 1",
    "timeout": "a number of seconds > 0",
    "max_restarts": "an integer >= 0",
    "run_dir": "a folder path",
}
# what mlflow.projects._run puts in every backend config (mlflow/projects/utils.py PROJECT_*)
MLFLOW_KEYS = frozenset({"ENV_MANAGER", "SYNCHRONOUS", "DOCKER_ARGS", "STORAGE_DIR", "build_image", "docker_auth",
                         "_mlflow_local_backend_run_id"})
ENTRY_HINT = ("the distcomp backend runs entry points whose command is `python -m distcomp.worker RECORD "
              "NAME=VALUE ...`; write such a project with `distcomp compile --target mlflow SPEC --out DIR`")


@dataclass(frozen=True)
class BackendSettings:
    """A checked backend config: distcomp's options and what MLflow asked for."""

    options: Mapping[str, Any] = field(default_factory=dict)  # the job record's options
    synchronous: bool = True
    storage_dir: str | None = None
    target: str = "local"  # another: a submit record to that target instead of a run here


def _is_int(value: Any, minimum: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= minimum


def _valid(key: str, value: Any) -> bool:
    """A value of distcomp's own keys (a run here, and the layout)."""
    if key in ("nproc_per_node", "nodes"):
        return _is_int(value, 1)
    if key == "max_restarts":
        return _is_int(value, 0)
    if key == "timeout":
        return isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value < float("inf")
    return isinstance(value, str) and value.strip() != ""


def parse_config(config: Mapping[str, Any] | None, cwd: Path) -> BackendSettings:
    """Check ``config``; every problem is reported at once. ``run_dir`` (and a submitting
    target's path options, see ``_keys``) are made absolute against ``cwd`` (the entry point
    runs in the project's folder, not where ``mlflow run`` started)."""
    config = dict(config or {})
    problems = []
    env_manager = config.get("ENV_MANAGER")
    if env_manager not in (None, "local"):
        problems.append(f"--env-manager {env_manager}: distcomp runs the ranks in the current environment "
                        "(the one distcomp is installed in); use --env-manager local")
    if config.get("DOCKER_ARGS") or config.get("build_image") or config.get("docker_auth"):
        problems.append("docker options do not apply: distcomp runs the ranks on this machine, not in a container")
    if "experiment" in config:
        problems.append("'experiment': the run's experiment is mlflow run's --experiment-name / --experiment-id")
    target = config.get("target", "local")
    mine = {key for key in config if key not in MLFLOW_KEYS and key not in ("experiment", "target")}
    # the installed targets (the plugin manager: ~50 ms of `mlflow run`) only when "target" or a
    # key that is not the run's own asks for them
    targets = submitting_targets() if target != "local" or not mine <= KEYS.keys() | NOT_KEYS.keys() else {}
    if target != "local" and (not isinstance(target, str) or target not in targets):
        problems.append(_bad_target(target, targets))
        target = "local"
    options: dict[str, Any] = {}
    for key, value in config.items():
        if key in MLFLOW_KEYS or key in ("experiment", "target"):
            continue
        problem, value = (_local_key(key, value, cwd, targets) if target == "local"
                          else _target_key(key, value, cwd, targets, target))
        if problem:
            problems.append(problem)
        else:
            options[key] = value
    if problems:
        raise MlflowTargetError("\n".join(problems))
    synchronous = config.get("SYNCHRONOUS")
    return BackendSettings(options, True if synchronous is None else bool(synchronous),
                           config.get("STORAGE_DIR"), target)


def _did_you_mean(word: str, choices: Iterable[str]) -> str | None:
    from ...spec._diagnostics import did_you_mean  # on a mistake only: the spec package is ~20 ms of `mlflow run`

    return did_you_mean(word, choices)


def _bad_target(target: Any, targets: Mapping[str, "TargetType"]) -> str:
    names = ["local", *sorted(targets)]
    hint = _did_you_mean(target, names) if isinstance(target, str) else None
    return (f"backend config target: expected one of {', '.join(map(repr, names))} (a target that submits), got "
            f"{target!r}" + (f" ({hint})" if hint else ""))


def _elsewhere(key: str, targets: Mapping[str, "TargetType"], but: str = "") -> list[str]:
    """The submitting targets other than ``but`` that take ``key``."""
    return sorted(name for name, t in targets.items() if name != but and key in keys_of(t))


def _local_key(key: str, value: Any, cwd: Path, targets: Mapping[str, "TargetType"]) -> tuple[str, Any]:
    """A key of a run here: (a problem, or "" and the value the job record holds)."""
    if key in NOT_KEYS:
        return f"backend config {key!r} does not apply: {NOT_KEYS[key]}", None
    if key not in KEYS:
        owners = _elsewhere(key, targets)
        if owners:
            which = f"the {owners[0]} target" if len(owners) == 1 else f"the targets {', '.join(owners)}"
            add = f'"target": "{owners[0]}"' if len(owners) == 1 else '"target" with one of them'
            return f"backend config {key!r} is an option of {which}: add {add}", None
        hint = _did_you_mean(key, KEYS)
        return (f"unknown backend config key {key!r}" + (f" ({hint})" if hint else "")
                + f"; the distcomp backend knows: {', '.join(KEYS)}, target"), None
    if not _valid(key, value):
        return f"backend config {key}: expected {KEYS[key]}, got {value!r}", None
    return "", str(cwd / Path(value).expanduser()) if key == "run_dir" else value


def _target_key(key: str, value: Any, cwd: Path, targets: Mapping[str, "TargetType"],
                target: str) -> tuple[str, Any]:
    """A key of a job submitted to ``target``: its own options, checked as they declare."""
    known = keys_of(targets[target])
    if key in NOT_KEYS:
        return f"backend config {key!r} does not apply: {NOT_KEYS[key]}", None
    if key not in known:
        owners = _elsewhere(key, targets, but=target)
        if key in KEYS or owners:
            who = (["a run on this machine (no \"target\")"] if key in KEYS else []) + [f"target {o}" for o in owners]
            listed = ", ".join(who[:-1]) + " or " + who[-1] if len(who) > 1 else who[0]
            return f"backend config {key!r} does not apply to target {target}: it is an option of {listed}", None
        hint = _did_you_mean(key, known)
        return (f"unknown backend config key {key!r}" + (f" ({hint})" if hint else "")
                + f"; with target {target} the distcomp backend knows: {', '.join(known)}, target"), None
    option = known[key]
    if option is None:  # the layout
        if not _valid(key, value):
            return f"backend config {key}: expected {LAYOUT[key]}, got {value!r}", None
        return "", value
    try:
        return "", check_value(targets[target], option, value, cwd)
    except UsageError as exc:
        return str(exc), None


def _words(command: str) -> list[str]:
    try:
        return shlex.split(command)
    except ValueError as exc:
        raise MlflowTargetError(f"the entry point's command cannot be split into arguments ({exc}): "
                                f"{command!r}") from None


def check_entry_command(template: str) -> None:
    """The entry point's command (before its parameters are filled) must be distcomp's worker on
    a job record."""
    try:
        head = shlex.split(template)
    except ValueError:
        head = []
    if tuple(head[:3]) != WORKER:
        raise MlflowTargetError(f"the entry point's command is {template!r}: {ENTRY_HINT}")


def entry_record(command: str, settings: BackendSettings, work_dir: str) -> JobRecord:
    """The job record the worker runs: the project's (the filled command names it, and its
    parameters' values), with the backend config's options over it. A record of a newer format
    is refused here, before any run exists."""
    argv = _words(command)
    if tuple(argv[:3]) != WORKER or len(argv) <= 3:
        raise MlflowTargetError(f"the entry point's command is {command!r}: {ENTRY_HINT}")
    path = os.path.join(work_dir, argv[3])
    project = bind_params(read_record(path), argv[4:], path)
    if project.action != "run":
        raise MlflowTargetError(f"{argv[3]}: a {project.action!r} job record; an MLflow project's runs a spec "
                                "(recompile it with `distcomp compile --target mlflow SPEC --out DIR`)")
    if settings.target != "local":  # the layout goes with it, what runs only here does not
        layout = {k: v for k, v in project.options.items() if k in LAYOUT}
        return JobRecord("submit", project.spec, inputs=project.inputs, target=settings.target,
                         options={**layout, **settings.options})
    return replace(project, params={}, options={**project.options, **settings.options})
