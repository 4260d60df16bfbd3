"""A registry in a temporary folder, and small components to publish into it."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Callable

import pytest

from distcomp.registry import Registry, RegistryError, open_registry

SPEC = """\
name: {name}
version: {version}
display_name: {title}
type: DistributedComponent
description: {description}
tags:
  framework: {framework}
inputs:
  steps:
    type: Integer
    default: 1
launcher:
  type: torch.distributed
  additional_arguments: python run.py --steps {{inputs.steps}}
code: {code}
"""

Make = Callable[..., Path]
_count = itertools.count()


def write_component(root: Path, name: str = "demo", version: str = "1.0.0", body: str = "print('hi')\n",
                    title: str = "Demo job", description: str = "Trains nothing at all.", framework: str = "test",
                    code: str = ".") -> Path:
    """A component folder (component.yaml + run.py) under ``root``; returns the folder."""
    folder = root / f"{name}-{version}-{next(_count)}"
    folder.mkdir(parents=True)
    (folder / "component.yaml").write_text(SPEC.format(name=name, version=version, title=title, code=code,
                                                       description=description, framework=framework),
                                           encoding="utf-8")
    (folder / "run.py").write_text(body, encoding="utf-8")
    return folder


@pytest.fixture
def registry(tmp_path: Path) -> Registry:
    return open_registry(str(tmp_path / "registry"))


@pytest.fixture
def make(tmp_path: Path) -> Make:
    """``make(name=..., version=..., body=...)``: a component folder outside the registry."""
    def build(**kwargs: str) -> Path:
        return write_component(tmp_path / "src", **kwargs)
    return build


def refused(call: Callable[[], object]) -> str:
    """The message of the RegistryError ``call()`` raises."""
    with pytest.raises(RegistryError) as info:
        call()
    return str(info.value)


def mismatch(folder: Path, what: str, ref: str = "demo@1.0.0") -> str:
    return (f"stored {ref} at {folder} does not match its content hash: {what}; the registry copy was modified "
            "after publishing — republishing the same version is refused; publish a new version or restore it")
