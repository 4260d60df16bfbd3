"""distcomp for Azure ML: a DistributedComponent spec as an azure-ai-ml command component.

>>> from azure.ai.ml.dsl import pipeline
>>> from distcomp import azureml
>>> train = azureml.load_component("examples/pytorch-ddp/component.yaml")   # doctest: +SKIP
>>> @pipeline(default_compute="cpu-cluster")
... def training(epochs: int = 3):
...     train(epochs=epochs)                                                # doctest: +SKIP

azure-ai-ml itself is imported only when a component is made, so ``import distcomp`` stays light.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from .targets.azureml import AzureMLTargetError, Compiled
from .targets.azureml import compile_component as _compile_component
from .targets.azureml import load_component as _load_component

if TYPE_CHECKING:
    from azure.ai.ml.entities import CommandComponent

    from .records import Plan
    from .targets._spec import SpecLike

__all__ = ["AzureMLTargetError", "compile_component", "load_component"]


def load_component(spec_or_path: "SpecLike", *, nodes: int | None = None, nproc_per_node: int | None = None,
                   environment: str | None = None, image: str | None = None) -> "CommandComponent":
    """The spec as an azure-ai-ml ``CommandComponent``, as ``azure.ai.ml.load_component``
    would load its compiled YAML; usable in an ``@pipeline`` like any Azure ML component.

    ``spec_or_path``: a ComponentSpec, a spec file (any dialect) or a folder holding
    ``component.yaml``. ``nodes``/``nproc_per_node`` override the spec; ``environment``
    (``azureml:NAME:VERSION``) or ``image`` replace its environment."""
    return _load_component(_plan(spec_or_path, nodes, nproc_per_node), environment=environment, image=image)


def compile_component(spec_or_path: "SpecLike", path: "str | os.PathLike[str]", *, nodes: int | None = None,
                      nproc_per_node: int | None = None, environment: str | None = None,
                      image: str | None = None, validate: bool = True) -> Compiled:
    """Write the component YAML to ``path`` (atomically), after azure-ai-ml validated it when
    it is installed (``validate=False`` or no azure-ai-ml: written unchecked)."""
    return _compile_component(_plan(spec_or_path, nodes, nproc_per_node), path, environment=environment,
                              image=image, validate=validate)


def _plan(spec_or_path: "SpecLike", nodes: int | None, nproc_per_node: int | None) -> "Plan":
    """The job's plan, as ``distcomp.compile`` makes it for the azureml target (its instances are
    not this machine: no GPU advice from here)."""
    from .core.plan import make_plan
    from .targets._spec import resolve_spec

    spec, _ = resolve_spec(spec_or_path, AzureMLTargetError)
    return make_plan(spec, nodes=nodes, nproc_per_node=nproc_per_node, gpu=False)
