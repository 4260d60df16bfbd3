"""The Azure ML target: a spec as an azure-ai-ml v2 command component with ``distribution``
and ``resources.instance_count``. Importing this imports no azure-ai-ml.

>>> train = load_component("examples/pytorch-ddp/component.yaml")              # doctest: +SKIP
>>> compile_component("examples/pytorch-ddp/component.yaml", "component.yml")  # doctest: +SKIP
"""

from ._azure import compile_component, compile_mapping, load_component, to_yaml
from ._component import AzureMLTargetError, Compiled, azure_name

__all__ = ["AzureMLTargetError", "Compiled", "azure_name", "compile_component", "compile_mapping",
           "load_component", "to_yaml"]
