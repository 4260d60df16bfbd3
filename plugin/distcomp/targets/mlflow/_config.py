"""The backend config of ``mlflow run -b distcomp -c JSON``, and the argv it gives the entry point.

MLflow adds its own keys to every backend config (env manager, synchronous, docker args,
storage dir, build image, docker auth); the rest must be distcomp's, checked here before any
run is created. ``"target": "slurm"`` submits the entry point's job to Slurm (``distcomp submit
--target slurm``, which waits) instead of running it here; the slurm target's own options
(partition, time, job_dir, ...) are keys then.
"""

from __future__ import annotations

import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from ...spec._diagnostics import did_you_mean
from ._errors import MlflowTargetError

# distcomp's keys -> the `distcomp run` flag and what the value must be
FLAGS = {
    "nproc_per_node": ("--nproc-per-node", "an integer >= 1"),
    "nodes": ("--nodes", "an integer >= 1"),
    "timeout": ("--timeout", "a number of seconds > 0"),
    "max_restarts": ("--max-restarts", "an integer >= 0"),
    "run_dir": ("--run-dir", "a folder path"),
}
# the targets the backend runs a job on, and the keys only one of them takes
TARGETS = ("local", "slurm")
LOCAL_ONLY = frozenset({"max_restarts", "run_dir"})
SLURM_FLAGS = {
    "partition": ("--partition", "a partition name"),
    "account": ("--account", "an account name"),
    "time": ("--time", "an integer >= 1 (minutes)"),
    "job_dir": ("--job-dir", "a folder path every node sees"),
    "gpus_per_node": ("--gpus-per-node", "an integer >= 0"),
    "mem": ("--mem", "a size as sbatch --mem takes it (16G)"),
    "cpus_per_task": ("--cpus-per-task", "an integer >= 1"),
    "sbatch": ("--sbatch", "a list of sbatch options (\"--qos=high\")"),
}
# what mlflow.projects._run puts in every backend config (mlflow/projects/utils.py PROJECT_*)
MLFLOW_KEYS = frozenset({"ENV_MANAGER", "SYNCHRONOUS", "DOCKER_ARGS", "STORAGE_DIR", "build_image", "docker_auth",
                         "_mlflow_local_backend_run_id"})
ENTRY_HINT = ("the distcomp backend runs entry points whose command is `distcomp run SPEC ...`; "
              "write such a project with `distcomp compile --target mlflow SPEC -o DIR`")


@dataclass(frozen=True)
class BackendSettings:
    """A checked backend config: distcomp's flags and what MLflow asked for."""

    flags: tuple[str, ...] = ()  # `distcomp run` flags, e.g. ("--nproc-per-node", "2")
    synchronous: bool = True
    storage_dir: str | None = None
    target: str = "local"  # "slurm": `distcomp submit --target slurm` instead of `distcomp run`


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
    known = {**FLAGS, **SLURM_FLAGS} if target == "slurm" else FLAGS
    skip = LOCAL_ONLY if target == "slurm" else frozenset()
    flags: list[str] = []
    for key, value in config.items():
        if key in MLFLOW_KEYS or key in ("experiment", "target"):
            continue
        if key in SLURM_FLAGS and target != "slurm":
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
        flag, expected = known[key]
        if not _valid(key, value):
            problems.append(f"backend config {key}: expected {expected}, got {value!r}")
            continue
        if key == "sbatch":
            flags += [f"{flag}={line}" for line in value]  # --sbatch=--qos=high: a value that starts with -
            continue
        text = str(cwd / Path(value).expanduser()) if key in ("run_dir", "job_dir") else str(value)
        flags += [flag, text]
    if problems:
        raise MlflowTargetError("\n".join(problems))
    synchronous = config.get("SYNCHRONOUS")
    return BackendSettings(tuple(flags), True if synchronous is None else bool(synchronous),
                           config.get("STORAGE_DIR"), target)


def check_entry_command(template: str) -> None:
    """The entry point's command (before its parameters are filled) must be ``distcomp run``."""
    try:
        head = shlex.split(template)[:2]
    except ValueError:
        head = []
    if head != ["distcomp", "run"]:
        raise MlflowTargetError(f"the entry point's command is {template!r}: {ENTRY_HINT}")


def entry_argv(command: str, settings: BackendSettings, python: str = sys.executable) -> list[str]:
    """The argv of the filled-in command (MLflow shell-quoted every value): ``distcomp`` becomes
    this interpreter's ``python -m distcomp``, the config's flags come last (they win)."""
    try:
        argv = shlex.split(command)
    except ValueError as exc:
        raise MlflowTargetError(f"the entry point's command cannot be split into arguments ({exc}): "
                                f"{command!r}") from None
    if argv[:2] != ["distcomp", "run"]:
        raise MlflowTargetError(f"the entry point's command is {command!r}: {ENTRY_HINT}")
    if settings.target == "slurm":
        return [python, "-m", "distcomp", "submit", "--target", "slurm", *_submit_args(argv[2:]), *settings.flags]
    return [python, "-m", "distcomp", *argv[1:], *settings.flags]


def _submit_args(args: list[str]) -> list[str]:
    """``distcomp run``'s arguments as ``submit`` takes them: ``--input-if-set NAME=VALUE`` is
    ``--input`` when VALUE is given, nothing when it is empty (submit has no such flag)."""
    out: list[str] = []
    i = 0
    while i < len(args):
        word = args[i]
        if word == "--input-if-set" and i + 1 < len(args):
            value, i = args[i + 1], i + 2
        elif word.startswith("--input-if-set="):
            value, i = word.partition("=")[2], i + 1
        else:
            out.append(word)
            i += 1
            continue
        if value.partition("=")[2] != "":
            out += ["--input", value]
    return out
