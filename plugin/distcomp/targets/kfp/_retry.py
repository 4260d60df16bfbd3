"""A component whose every task retries its failed step: issue 36's restart on KFP.

A retry runs the whole step again, which starts every rank of its node, or submits the whole
Kubeflow job again for several nodes: the contract's restart of every rank on every node. KFP
keeps a retry policy on a task (``task.set_retry``), never on a component, so the component
sets it on each task it makes (``__call__``, in a pipeline) and on the one task of its own
pipeline spec (what ``distcomp compile --target kfp`` writes). Imported only with kfp.
"""

from __future__ import annotations

from typing import Any

from kfp.dsl import pipeline_task, structures
from kfp.dsl.python_component import PythonComponent
from kfp.pipeline_spec import pipeline_spec_pb2


class RetriedComponent(PythonComponent):
    """``component`` whose tasks retry a failed step up to ``max_restarts`` times."""

    def __init__(self, component: PythonComponent, max_restarts: int) -> None:
        super().__init__(component.component_spec, component.python_func)
        self.max_restarts = max_restarts

    def __call__(self, *args: Any, **kwargs: Any) -> pipeline_task.PipelineTask:
        return super().__call__(*args, **kwargs).set_retry(num_retries=self.max_restarts)

    @property
    def pipeline_spec(self) -> pipeline_spec_pb2.PipelineSpec:
        spec = super().pipeline_spec
        policy = structures.RetryPolicy(max_retry_count=self.max_restarts).to_proto()  # set_retry's, defaults included
        for task in spec.root.dag.tasks.values():
            task.retry_policy.CopyFrom(policy)
        return spec
