"""The Kubeflow job kinds this target builds itself.

A ``KubeflowJobType`` (a launcher's ``kubeflow`` native mapping, read by ``distcomp.core.kinds``)
with no ``build`` of its own names one of these kinds; ``builder`` finds the manifest builder
for it. The target reads only the record, so it knows no launcher.
"""

from __future__ import annotations

from ...records import KubeflowBuild, KubeflowJobType
from ._errors import CompileError
from ._mpijob import mpijob
from ._pytorchjob import pytorchjob
from ._tfjob import tfjob
from ._trainjob import trainjob

__all__ = ["BUILDERS", "builder", "mpijob", "pytorchjob", "tfjob", "trainjob"]

# (API version, kind) -> its builder: the kinds a record may name without a build of its own
BUILDERS: dict[tuple[str, str], KubeflowBuild] = {
    ("kubeflow.org/v1", "PyTorchJob"): pytorchjob, ("kubeflow.org/v2beta1", "MPIJob"): mpijob,
    ("kubeflow.org/v1", "TFJob"): tfjob, ("trainer.kubeflow.org/v1alpha1", "TrainJob"): trainjob}


def builder(job: KubeflowJobType) -> KubeflowBuild:
    """The record's own ``build``, or this target's for the kind it names."""
    if job.build is not None:
        return job.build
    found = [b for (version, kind), b in BUILDERS.items() if kind == job.kind and job.api_version in ("", version)]
    if not found:
        known = ", ".join(f"{kind} ({version})" for version, kind in BUILDERS)
        raise CompileError(f"the Kubeflow {job.kind}" + (f" ({job.api_version})" if job.api_version else "")
                           + f" of launcher {job.launcher!r} has no build, and this target builds only {known}; "
                           "give its native mapping a build option")
    return found[0]
