"""The spec as azure-ai-ml objects and files, checked by azure-ai-ml itself (imported here only).

``load_component`` gives a ``CommandComponent`` for an ``@pipeline``; ``compile_component``
writes the YAML file, after ``azure.ai.ml.load_component(...)._validate()`` passed offline on
exactly that text, so a file that azure-ai-ml would refuse is never written.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, cast

import yaml

from ...base.files import write_atomic
from ._component import AzureMLTargetError, Compiled, component_mapping

if TYPE_CHECKING:
    from azure.ai.ml.entities import CommandComponent

    from ...records import Plan


def compile_mapping(plan: "Plan", base_dir: Path, *, environment: str | None = None,
                    image: str | None = None) -> Compiled:
    """The component mapping of ``plan`` (the core's) for a file in ``base_dir``."""
    from ...core.plugins import PluginError, get_plugin_manager

    try:
        pm = get_plugin_manager()
    except PluginError as exc:
        raise AzureMLTargetError(str(exc)) from None
    return component_mapping(plan, base_dir, pm, environment=environment, image=image)


def to_yaml(component: dict[str, Any]) -> str:
    return yaml.safe_dump(component, sort_keys=False, allow_unicode=True, width=100)


def load_component(plan: "Plan", *, environment: str | None = None, image: str | None = None) -> "CommandComponent":
    """The job of ``plan`` as an azure-ai-ml ``CommandComponent``, as ``azure.ai.ml.load_component``
    would load its compiled YAML; usable in an ``@pipeline`` like any Azure ML component
    (``distcomp.azureml.load_component`` takes a spec). ``environment``
    (``azureml:NAME:VERSION``) or ``image`` replace its environment."""
    spec = plan.spec
    base = spec.source.parent if spec.source is not None else spec.code
    compiled = compile_mapping(plan, base, environment=environment, image=image)
    component = _load(to_yaml(compiled.component), base)
    _check(component)
    return component


def compile_component(plan: "Plan", path: str | os.PathLike[str], *, environment: str | None = None,
                      image: str | None = None, validate: bool = True) -> Compiled:
    """Write the component YAML of ``plan`` to ``path`` (atomically), after azure-ai-ml validated
    it when it is installed (``validate=False`` or no azure-ai-ml: written unchecked)."""
    out = Path(path).absolute()

    def mapping(folder: Path) -> Compiled:  # the component as a file in ``folder`` holds it
        return compile_mapping(plan, folder, environment=environment, image=image)

    compiled = mapping(out.parent)
    text = to_yaml(compiled.component)
    if validate:
        # azure-ai-ml opens a local path (code, file: environment) through the component's folder,
        # which --out may name before it exists (new/nested/dir: `../../../env.yml` is then no path
        # the OS can open), and nothing is created before the check: the same component, with its
        # paths relative to the nearest folder that exists, is what it checks there
        there = _existing(out.parent)
        checked = text if there == out.parent else to_yaml(mapping(there).component)
        _check(_load(checked, there))
    try:
        write_atomic(out, text)
    except OSError as exc:
        raise AzureMLTargetError(f"cannot write {out}: {exc.strerror or exc}") from None
    return compiled


def _existing(folder: Path) -> Path:
    """``folder``, or its nearest ancestor that exists."""
    while not folder.is_dir() and folder.parent != folder:
        folder = folder.parent
    return folder


def azure_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("azure.ai.ml") is not None


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """azure-ai-ml logs a warning per experimental schema class it meets: not the user's concern."""
    logger = logging.getLogger("azure.ai.ml")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def _load(text: str, base_dir: Path) -> "CommandComponent":
    """azure-ai-ml's own loader on ``text``, as if it were a file in ``base_dir``."""
    if not azure_available():
        raise AzureMLTargetError("azure-ai-ml is not installed: pip install 'distcomp[azureml]'")
    from azure.ai.ml import load_component
    from marshmallow import ValidationError

    try:
        with _quiet():
            # a command component by construction: the text is the one this target wrote
            return cast("CommandComponent", load_component(source=io.StringIO(text),
                                                           relative_origin=str(base_dir / "component.yml")))
    except ValidationError as exc:
        raise AzureMLTargetError(f"azure-ai-ml refuses the component: {_first_lines(str(exc))}") from None
    except Exception as exc:  # azure-ai-ml's own exception types (UserErrorException, ...)
        raise AzureMLTargetError(f"azure-ai-ml refuses the component: {type(exc).__name__}: "
                                 f"{_first_lines(str(exc))}") from None


def _check(component: "CommandComponent") -> None:
    with _quiet():
        result = component._validate()
    if not result.passed:
        problems = "; ".join(f"{k}: {v}" for k, v in result.error_messages.items())
        raise AzureMLTargetError(f"azure-ai-ml refuses the component: {problems}")


def _first_lines(text: str, limit: int = 1500) -> str:
    """azure-ai-ml's report without its JSON frame and advert: ``path: message`` per error."""
    errors = re.findall(r'"message":\s*"((?:[^"\\]|\\.)*)",\s*"path":\s*"([^"]*)"', text)
    if errors:
        text = "; ".join(f"{path}: {message}" for message, path in errors)
    else:
        text = text.split("The easiest way to author")[0].strip()
    return text if len(text) <= limit else text[:limit] + " ..."
