"""The MLflow Projects target: a component as an MLflow project (``compile_project``), and the
``distcomp`` project backend that runs its entry point as a distributed job
(``mlflow run DIR -b distcomp -c '{"nproc_per_node": 2}' --env-manager local``), here or, with
``"target": NAME`` in the config, through any target that submits (slurm, ray, a third party's).

Importing this imports no mlflow: ``DistcompBackend`` loads it when first asked for (MLflow's
entry point loader asks for it by name).

>>> compile_project("examples/pytorch-ddp/component.yaml", "/tmp/ddp-project")   # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any

from ._errors import MlflowTargetError
from ._project import compile_project

__all__ = ["DistcompBackend", "MlflowTargetError", "compile_project"]


def __getattr__(name: str) -> Any:
    if name == "DistcompBackend":
        from ._backend import DistcompBackend

        return DistcompBackend
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
