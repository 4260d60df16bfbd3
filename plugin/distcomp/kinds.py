"""The Kubeflow job kinds distcomp builds, as records a launcher plugin yields.

Each function returns the ``KubeflowJobType`` of one kind for a launcher: what ``distcomp
submit`` needs to create and follow it (API version, plural, the leading pod). They are data:
``build`` is None, so the Kubeflow target builds the manifest itself. A launcher yields them from
``distcomp_kubeflow_jobs`` without importing any target, and the target reads only the record,
so it knows no launcher. A plugin with a kind of its own passes its own ``build``.
"""

from __future__ import annotations

from .records import KubeflowJobType

__all__ = ["mpijob_type", "pytorchjob_type", "tfjob_type", "trainjob_type"]

# the operators label each pod with its job's name and its replica (training-operator v1, mpi-operator)
_JOB = "training.kubeflow.org/job-name={name}"


def pytorchjob_type(launcher: str, description: str = "one pod per node, torchrun in each") -> KubeflowJobType:
    return KubeflowJobType(launcher, "PyTorchJob", None, description, api_version="kubeflow.org/v1",
                           plural="pytorchjobs", leader=f"{_JOB},training.kubeflow.org/replica-type=master")


def mpijob_type(launcher: str, description: str = "mpi-operator v2beta1: mpirun in the launcher pod, sshd in workers",
                ) -> KubeflowJobType:
    return KubeflowJobType(launcher, "MPIJob", None, description, api_version="kubeflow.org/v2beta1",
                           plural="mpijobs", leader=f"{_JOB},training.kubeflow.org/job-role=launcher")


def tfjob_type(launcher: str, description: str = "one pod per task (chief, workers, ps, evaluator)") -> KubeflowJobType:
    return KubeflowJobType(launcher, "TFJob", None, description, api_version="kubeflow.org/v1", plural="tfjobs",
                           leader=f"{_JOB},training.kubeflow.org/replica-type in (chief,worker),"
                                  "training.kubeflow.org/replica-index=0")


def trainjob_type(launcher: str, runtime: str, description: str = "") -> KubeflowJobType:
    """A Kubeflow Trainer v2 TrainJob on the (Cluster)TrainingRuntime named ``runtime``."""
    return KubeflowJobType(launcher, "TrainJob", None, description or f"Kubeflow Trainer v2, runtime {runtime}",
                           api_version="trainer.kubeflow.org/v1alpha1", plural="trainjobs", runtime=runtime,
                           leader="jobset.sigs.k8s.io/jobset-name={name},batch.kubernetes.io/job-completion-index=0")
