"""The KFP v2 target: a spec as a component of a KFP pipeline whose step starts the ranks of
one node itself, or, for several nodes, creates a Kubeflow training job sharing a volume with
the step: either way ``python -m distcomp.worker`` on a job record the step writes from the
compiled template and what KFP delivered. Importing this imports no kfp.

>>> train = load_component("examples/pytorch-ddp/component.yaml")       # doctest: +SKIP
>>> compile_component("examples/pytorch-ddp", "ddp-component.yaml")     # doctest: +SKIP
"""

from ._component import DEFAULT_IMAGE, compile_component, load_component
from ._errors import KfpTargetError

__all__ = ["DEFAULT_IMAGE", "KfpTargetError", "compile_component", "load_component"]
