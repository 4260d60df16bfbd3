"""A job before it starts: the spec with its overrides, typed inputs that exist, and output
paths under the run folder. Everything here is checked before any process starts."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Mapping

from .spec import ComponentSpec, InputError, bind_inputs
from .spec._values import is_uri

__all__ = ["Job", "create_outputs", "default_run_dir", "make_job"]


@dataclass(frozen=True)
class Job:
    spec: ComponentSpec
    values: Mapping[str, Any]  # typed input values
    outputs: Mapping[str, str]  # output name -> absolute path
    run_dir: Path
    job_id: str = field(default="")


def default_run_dir(spec: ComponentSpec, base: Path) -> Path:
    """``runs/NAME-YYYYmmdd-HHMMSS-xxxx`` under ``base``: unique, and sorted by time."""
    return base / "runs" / f"{spec.name}-{time.strftime('%Y%m%d-%H%M%S')}-{os.urandom(2).hex()}"


def _check_local_ports(spec: ComponentSpec, values: Mapping[str, Any]) -> list[str]:
    """Port inputs of a local run must be paths that exist and hold what the input declares."""
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
        if not path.exists():
            problems.append(f"input '{name}': {path} does not exist")
        elif inp.holds == "folder" and not path.is_dir():
            problems.append(f"input '{name}' is a folder ({inp.type}), but {path} is a file")
        elif inp.holds == "file" and not path.is_file():
            problems.append(f"input '{name}' is a file ({inp.type}), but {path} is a folder")
    return problems


def make_job(spec: ComponentSpec, given: Mapping[str, str], given_outputs: Mapping[str, str],
             run_dir: Path, cwd: Path) -> Job:
    """Bind and check everything; raises InputError listing every problem. Creates nothing."""
    problems = []
    for name in given_outputs:
        if name not in spec.outputs:
            problems.append(f"unknown output '{name}' (expected one of: {', '.join(spec.outputs) or 'none'})")
    try:
        values = bind_inputs(spec, given, cwd)
    except InputError as exc:
        problems.extend(str(exc).splitlines())
        values = {}
    problems += _check_local_ports(spec, values)
    outputs = {}
    for name in spec.outputs:
        path = Path(given_outputs[name]) if name in given_outputs else run_dir / "outputs" / name
        outputs[name] = str((cwd / path).absolute() if not path.is_absolute() else path)
    if problems:
        raise InputError("\n".join(problems))
    return Job(spec, MappingProxyType(dict(values)), MappingProxyType(outputs), run_dir.absolute(),
               run_dir.name)


def create_outputs(job: Job) -> None:
    """Make each output's folder (or a file output's parent) before the ranks start."""
    for name, path in job.outputs.items():
        target = Path(path)
        (target if job.spec.outputs[name].holds != "file" else target.parent).mkdir(parents=True, exist_ok=True)
