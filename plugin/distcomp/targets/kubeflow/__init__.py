"""The kubeflow target: a DistributedComponent as a Kubeflow training job (PyTorchJob,
MPIJob v2beta1, TFJob, or a Trainer v2 TrainJob), valid against the operators' CRDs."""

from ._compile import CompileError, compile_job, job_name
from ._submit import JobOutcome, SubmitError, job_type_of, submit_and_wait

__all__ = ["CompileError", "JobOutcome", "SubmitError", "compile_job", "job_name", "job_type_of", "submit_and_wait"]
