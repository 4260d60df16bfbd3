"""The Azure ML target: a job's plan as an azure-ai-ml v2 command component with
``distribution`` and ``resources.instance_count``. Importing this imports no azure-ai-ml.
Its functions take the core's plan; ``distcomp.azureml``'s take a spec and make its plan:

>>> train = load_component(plan)                                             # doctest: +SKIP
>>> compile_component(plan, "component.yml")                                 # doctest: +SKIP
"""

from ._azure import compile_component, compile_mapping, load_component, to_yaml
from ._component import AzureMLTargetError, Compiled, azure_name

__all__ = ["AzureMLTargetError", "Compiled", "azure_name", "compile_component", "compile_mapping",
           "load_component", "to_yaml"]
