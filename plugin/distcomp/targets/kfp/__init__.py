"""The KFP v2 target: a spec as a component of a KFP pipeline whose step starts the ranks of
one node itself (``python -m distcomp run`` in the step's container), or, for several nodes,
creates a Kubeflow training job (``python -m distcomp submit``) sharing a volume with the
step. Importing this imports no kfp.

>>> train = load_component("examples/pytorch-ddp/component.yaml")       # doctest: +SKIP
>>> compile_component("examples/pytorch-ddp", "ddp-component.yaml")     # doctest: +SKIP
"""

from ._component import DEFAULT_IMAGE, compile_component, load_component
from ._errors import KfpTargetError

__all__ = ["DEFAULT_IMAGE", "KfpTargetError", "compile_component", "load_component"]
