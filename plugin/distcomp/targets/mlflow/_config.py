"""The backend config of ``mlflow run -b distcomp -c JSON``, and the argv it gives the entry point.

MLflow adds its own keys to every backend config (env manager, synchronous, docker args,
storage dir, build image, docker auth); the rest must be distcomp's, checked here before any
run is created.
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


def _is_int(value: Any, minimum: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= minimum


def _valid(key: str, value: Any) -> bool:
    if key in ("nproc_per_node", "nodes"):
        return _is_int(value, 1)
    if key == "max_restarts":
        return _is_int(value, 0)
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
    flags: list[str] = []
    for key, value in config.items():
        if key in MLFLOW_KEYS or key == "experiment":
            continue
        if key not in FLAGS:
            hint = did_you_mean(key, FLAGS)
            problems.append(f"unknown backend config key {key!r}" + (f" ({hint})" if hint else "")
                            + f"; the distcomp backend knows: {', '.join(FLAGS)}")
            continue
        flag, expected = FLAGS[key]
        if not _valid(key, value):
            problems.append(f"backend config {key}: expected {expected}, got {value!r}")
            continue
        text = str(cwd / Path(value).expanduser()) if key == "run_dir" else str(value)
        flags += [flag, text]
    if problems:
        raise MlflowTargetError("\n".join(problems))
    synchronous = config.get("SYNCHRONOUS")
    return BackendSettings(tuple(flags), True if synchronous is None else bool(synchronous),
                           config.get("STORAGE_DIR"))


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
    return [python, "-m", "distcomp", *argv[1:], *settings.flags]
