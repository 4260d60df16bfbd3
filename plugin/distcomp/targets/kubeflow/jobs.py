"""The Kubeflow job kinds distcomp can build, public for launcher plugins.

Each function returns the ``KubeflowJobType`` record of one kind for a launcher: the builder of
its manifest and what ``distcomp submit`` needs to create and follow it (API version, plural,
the leading pod). A launcher yields these from ``distcomp_kubeflow_jobs``; the target reads
only the record, so it knows no launcher and a plugin's own kind is submitted the same way.
"""

from __future__ import annotations

from ...records import KubeflowJobType
from ._mpijob import mpijob
from ._pytorchjob import pytorchjob
from ._tfjob import tfjob
from ._trainjob import trainjob

__all__ = ["mpijob", "mpijob_type", "pytorchjob", "pytorchjob_type", "tfjob", "tfjob_type", "trainjob",
           "trainjob_type"]

# the operators label each pod with its job's name and its replica (training-operator v1, mpi-operator)
_JOB = "training.kubeflow.org/job-name={name}"


def pytorchjob_type(launcher: str, description: str = "one pod per node, torchrun in each") -> KubeflowJobType:
    return KubeflowJobType(launcher, "PyTorchJob", pytorchjob, description, api_version="kubeflow.org/v1",
                           plural="pytorchjobs", leader=f"{_JOB},training.kubeflow.org/replica-type=master")


def mpijob_type(launcher: str, description: str = "mpi-operator v2beta1: mpirun in the launcher pod, sshd in workers",
                ) -> KubeflowJobType:
    return KubeflowJobType(launcher, "MPIJob", mpijob, description, api_version="kubeflow.org/v2beta1",
                           plural="mpijobs", leader=f"{_JOB},training.kubeflow.org/job-role=launcher")


def tfjob_type(launcher: str, description: str = "one pod per task (chief, workers, ps, evaluator)") -> KubeflowJobType:
    return KubeflowJobType(launcher, "TFJob", tfjob, description, api_version="kubeflow.org/v1", plural="tfjobs",
                           leader=f"{_JOB},training.kubeflow.org/replica-type in (chief,worker),"
                                  "training.kubeflow.org/replica-index=0")


def trainjob_type(launcher: str, runtime: str, description: str = "") -> KubeflowJobType:
    """A Kubeflow Trainer v2 TrainJob on the (Cluster)TrainingRuntime named ``runtime``."""
    return KubeflowJobType(launcher, "TrainJob", trainjob, description or f"Kubeflow Trainer v2, runtime {runtime}",
                           api_version="trainer.kubeflow.org/v1alpha1", plural="trainjobs", runtime=runtime,
                           leader="jobset.sigs.k8s.io/jobset-name={name},batch.kubernetes.io/job-completion-index=0")
