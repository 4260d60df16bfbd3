"""The kubeflow target: a DistributedComponent as a Kubeflow training job (PyTorchJob,
MPIJob v2beta1, TFJob, or a Trainer v2 TrainJob), valid against the operators' CRDs.

Its names load on first use: the built-in targets' records import ``_podtemplate`` from here
for every command (``distcomp run`` too), which must not pay for the compiler and the client."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...base.lazy import exports

if TYPE_CHECKING:
    from ._compile import CompileError, compile_job, job_name
    from ._submit import JobOutcome, SubmitError, job_type_of, submit_and_wait

_MODULES = {"_compile": ("CompileError", "compile_job", "job_name"),  # module: the names it provides
            "_submit": ("JobOutcome", "SubmitError", "job_type_of", "submit_and_wait")}
__getattr__, __dir__ = exports(__name__, _MODULES, globals())

__all__ = ["CompileError", "JobOutcome", "SubmitError", "compile_job", "job_name", "job_type_of", "submit_and_wait"]

