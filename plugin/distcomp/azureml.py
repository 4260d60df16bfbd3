"""distcomp for Azure ML: a DistributedComponent spec as an azure-ai-ml command component.

>>> from azure.ai.ml.dsl import pipeline
>>> from distcomp import azureml
>>> train = azureml.load_component("examples/pytorch-ddp/component.yaml")   # doctest: +SKIP
>>> @pipeline(default_compute="cpu-cluster")
... def training(epochs: int = 3):
...     train(epochs=epochs)                                                # doctest: +SKIP

azure-ai-ml itself is imported only when a component is made, so ``import distcomp`` stays light.
"""

from .targets.azureml import AzureMLTargetError, compile_component, load_component

__all__ = ["AzureMLTargetError", "compile_component", "load_component"]
