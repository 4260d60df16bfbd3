"""What a spec's conda environment asks pip for: its ``pip:`` list, read from the spec's inline
``conda`` or its ``conda_file``, and the conda-only packages no pip installs (python and pip
aside). Targets whose nodes install packages with pip (an image's requirements, Ray's
``runtime_env.pip``) take the first and say the second."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

from ..errors import UsageError

if TYPE_CHECKING:
    from ..spec import ComponentSpec


class CondaError(UsageError, ValueError):
    """The spec's conda environment cannot be read: which file or field, and why."""


@dataclass(frozen=True)
class CondaPip:
    """The conda environment's pip packages (in order), its other packages, where it came from
    (for messages; empty: the spec has none) and what could not be used."""

    pip: tuple[str, ...] = ()
    others: tuple[str, ...] = ()
    where: str = ""
    notes: tuple[str, ...] = ()


def conda_pip(spec: "ComponentSpec") -> CondaPip:
    """The spec's conda environment as pip sees it; a file that is not on this machine (a URL,
    an ``azureml:`` asset) is a note, a missing or unreadable one a CondaError."""
    env = spec.environment
    if env is not None and env.conda_file:
        if "://" in env.conda_file or env.conda_file.startswith("azureml:"):
            return CondaPip(notes=(f"the conda file {env.conda_file} is not on this machine: its packages are not "
                                   "installed",))
        base = spec.source.parent if spec.source is not None else Path.cwd()
        path = base / env.conda_file
        if not path.is_file():
            raise CondaError(f"{spec.source or spec.ref}: its conda file {env.conda_file!r} does not exist "
                             f"(resolved to {path})")
        return _split(_yaml(path), f"the conda file {env.conda_file}")
    if env is not None and env.conda:
        return _split(env.conda, "the spec's conda environment")
    return CondaPip()


def _yaml(path: Path) -> Any:
    import yaml

    try:
        return yaml.safe_load(path.read_text(encoding="utf-8-sig"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise CondaError(f"{path}: cannot read the conda file: {first}") from None


def _split(conda: Any, where: str) -> CondaPip:
    deps = conda.get("dependencies") if isinstance(conda, Mapping) else None
    if not isinstance(deps, (list, tuple)):
        raise CondaError(f"{where}: not a conda environment (expected dependencies: [...])")
    pip: list[str] = []
    others: list[str] = []
    for dep in deps:
        if isinstance(dep, Mapping) and isinstance(dep.get("pip"), (list, tuple)):
            pip += [str(p).strip() for p in dep["pip"] if str(p).strip()]
        elif isinstance(dep, str) and re.split(r"[=<>!~ ]", dep.strip(), maxsplit=1)[0] not in ("python", "pip"):
            others.append(dep.strip())
    return CondaPip(tuple(pip), tuple(others), where)
