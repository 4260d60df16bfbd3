"""The backend config of ``mlflow run -b distcomp -c JSON``, and the job record it makes of the
entry point's filled-in command and the project's record.

MLflow adds its own keys to every backend config (env manager, synchronous, docker args,
storage dir, build image, docker auth); the rest must be distcomp's, checked here before any
run is created. ``"target": "slurm"`` submits the entry point's job to Slurm (a ``submit``
record to the slurm target, which waits) instead of running it here; the slurm target's own
options (partition, time, job_dir, ...) are keys then.

The command is ``python -m distcomp.worker RECORD NAME=VALUE ...`` (``_mlproject``). A project
written by an older distcomp has ``distcomp run SPEC [--nodes N] [--nproc-per-node M] --input
NAME=VALUE --input-if-set NAME=VALUE ...``: that exact form is still read; anything else is
refused with what to do.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping

from ...jobrecord import JobRecord, bind_params, read_record
from ...spec._diagnostics import did_you_mean
from ._errors import MlflowTargetError
from ._mlproject import WORKER

# distcomp's keys (the job record's options) -> what the value must be
KEYS = {
    "nproc_per_node": "an integer >= 1",
    "nodes": "an integer >= 1",
    "timeout": "a number of seconds > 0",
    "max_restarts": "an integer >= 0",
    "run_dir": "a folder path",
}
# the targets the backend runs a job on, and the keys only one of them takes
TARGETS = ("local", "slurm")
LOCAL_ONLY = frozenset({"max_restarts", "run_dir"})
SLURM_KEYS = {  # the slurm target's option names
    "partition": "a partition name",
    "account": "an account name",
    "time": "an integer >= 1 (minutes)",
    "job_dir": "a folder path every node sees",
    "gpus_per_node": "an integer >= 0",
    "mem": "a size as sbatch --mem takes it (16G)",
    "cpus_per_task": "an integer >= 1",
    "sbatch": "a list of sbatch options (\"--qos=high\")",
}
# what mlflow.projects._run puts in every backend config (mlflow/projects/utils.py PROJECT_*)
MLFLOW_KEYS = frozenset({"ENV_MANAGER", "SYNCHRONOUS", "DOCKER_ARGS", "STORAGE_DIR", "build_image", "docker_auth",
                         "_mlflow_local_backend_run_id"})
ENTRY_HINT = ("the distcomp backend runs entry points whose command is `python -m distcomp.worker RECORD "
              "NAME=VALUE ...`; write such a project with `distcomp compile --target mlflow SPEC -o DIR`")


@dataclass(frozen=True)
class BackendSettings:
    """A checked backend config: distcomp's options and what MLflow asked for."""

    options: Mapping[str, Any] = field(default_factory=dict)  # the job record's options
    synchronous: bool = True
    storage_dir: str | None = None
    target: str = "local"  # "slurm": a submit record to the slurm target instead of a run here


def _is_int(value: Any, minimum: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= minimum


def _valid(key: str, value: Any) -> bool:
    if key in ("nproc_per_node", "nodes", "time", "cpus_per_task"):
        return _is_int(value, 1)
    if key in ("max_restarts", "gpus_per_node"):
        return _is_int(value, 0)
    if key == "sbatch":
        return isinstance(value, list) and all(isinstance(v, str) and v.strip() for v in value)
    if key == "timeout":
        return isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value < float("inf")
    return isinstance(value, str) and value.strip() != ""


def parse_config(config: Mapping[str, Any] | None, cwd: Path) -> BackendSettings:
    """Check ``config``; every problem is reported at once. ``run_dir`` is made absolute against
    ``cwd`` (the entry point runs in the project's folder, not where ``mlflow run`` started)."""
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
    if target not in TARGETS:
        problems.append(f"backend config target: expected one of {', '.join(map(repr, TARGETS))}, got {target!r}")
        target = "local"
    known = {**KEYS, **SLURM_KEYS} if target == "slurm" else KEYS
    skip = LOCAL_ONLY if target == "slurm" else frozenset()
    options: dict[str, Any] = {}
    for key, value in config.items():
        if key in MLFLOW_KEYS or key in ("experiment", "target"):
            continue
        if key in SLURM_KEYS and target != "slurm":
            problems.append(f"backend config {key!r} is an option of the slurm target: add \"target\": \"slurm\"")
            continue
        if key in LOCAL_ONLY and target == "slurm":
            problems.append(f"backend config {key!r} does not apply to target slurm (a job on Slurm keeps its "
                            "folder under job_dir and does not restart)")
            continue
        if key not in known:
            hint = did_you_mean(key, known)
            problems.append(f"unknown backend config key {key!r}" + (f" ({hint})" if hint else "")
                            + f"; the distcomp backend knows: {', '.join(k for k in known if k not in skip)}, target")
            continue
        if not _valid(key, value):
            problems.append(f"backend config {key}: expected {known[key]}, got {value!r}")
            continue
        options[key] = str(cwd / Path(value).expanduser()) if key in ("run_dir", "job_dir") else value
    if problems:
        raise MlflowTargetError("\n".join(problems))
    synchronous = config.get("SYNCHRONOUS")
    return BackendSettings(options, True if synchronous is None else bool(synchronous),
                           config.get("STORAGE_DIR"), target)


def _words(command: str) -> list[str]:
    try:
        return shlex.split(command)
    except ValueError as exc:
        raise MlflowTargetError(f"the entry point's command cannot be split into arguments ({exc}): "
                                f"{command!r}") from None


def check_entry_command(template: str) -> None:
    """The entry point's command (before its parameters are filled) must be distcomp's worker on
    a job record, or the ``distcomp run`` of a project an older distcomp wrote."""
    try:
        head = shlex.split(template)
    except ValueError:
        head = []
    if tuple(head[:3]) != WORKER and head[:2] != ["distcomp", "run"]:
        raise MlflowTargetError(f"the entry point's command is {template!r}: {ENTRY_HINT}")


def entry_record(command: str, settings: BackendSettings, work_dir: str) -> JobRecord:
    """The job record the worker runs: the project's (the filled command names it, and its
    parameters' values), with the backend config's options over it. A record of a newer format
    is refused here, before any run exists."""
    argv = _words(command)
    if tuple(argv[:3]) == WORKER and len(argv) > 3:
        path = os.path.join(work_dir, argv[3])
        project = bind_params(read_record(path), argv[4:], path)
    elif argv[:2] == ["distcomp", "run"] and len(argv) > 2:
        project = _older_form(argv[2:], work_dir, command)
    else:
        raise MlflowTargetError(f"the entry point's command is {command!r}: {ENTRY_HINT}")
    if project.action != "run":
        raise MlflowTargetError(f"{argv[3]}: a {project.action!r} job record; an MLflow project's runs a spec "
                                "(recompile it with `distcomp compile --target mlflow SPEC -o DIR`)")
    if settings.target == "slurm":  # the layout goes with it, what runs only here does not
        layout = {k: v for k, v in project.options.items() if k in ("nodes", "nproc_per_node")}
        return JobRecord("submit", project.spec, inputs=project.inputs, target="slurm",
                         options={**layout, **settings.options})
    return replace(project, params={}, options={**project.options, **settings.options})


def _older_form(args: list[str], work_dir: str, command: str) -> JobRecord:
    """``distcomp run SPEC ...`` as ``distcomp compile --target mlflow`` wrote it before projects
    carried a job record: the spec, the layout and the inputs; any other word is refused."""
    options: dict[str, Any] = {}
    inputs: dict[str, str] = {}
    spec, rest = args[0], args[1:]
    i = 0
    while i + 1 < len(rest):
        flag, value = rest[i], rest[i + 1]
        if flag in ("--nodes", "--nproc-per-node") and value.isdigit() and int(value) >= 1:
            options[flag[2:].replace("-", "_")] = int(value)
        elif flag in ("--input", "--input-if-set") and "=" in value:
            name, _, text = value.partition("=")
            if text or flag == "--input":  # --input-if-set NAME=: not given
                inputs[name] = text
        else:
            break
        i += 2
    if i != len(rest) or spec.startswith("-"):
        raise MlflowTargetError(f"the entry point's command is {command!r}, not one distcomp wrote: recompile "
                                "the project with `distcomp compile --target mlflow SPEC -o DIR`")
    return JobRecord("run", os.path.join(work_dir, spec), options=options, inputs=inputs)
