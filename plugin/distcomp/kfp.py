"""distcomp for Kubeflow Pipelines v2: a DistributedComponent spec as a pipeline component.

>>> from kfp import dsl
>>> from distcomp import kfp as distcomp_kfp
>>> train = distcomp_kfp.load_component("examples/pytorch-ddp/component.yaml")   # doctest: +SKIP
>>> @dsl.pipeline
... def pipeline(epochs: int = 3):
...     train(epochs=epochs)                                                      # doctest: +SKIP

kfp itself is imported only when a component is made, so ``import distcomp`` stays light.
"""

from .targets.kfp import DEFAULT_IMAGE, KfpTargetError, compile_component, load_component

__all__ = ["DEFAULT_IMAGE", "KfpTargetError", "compile_component", "load_component"]
