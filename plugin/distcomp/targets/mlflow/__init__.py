"""The MLflow Projects target: a component as an MLflow project (``compile_project``), and the
``distcomp`` project backend that runs its entry point as a distributed job
(``mlflow run DIR -b distcomp -c '{"nproc_per_node": 2}' --env-manager local``), here or, with
``"target": NAME`` in the config, through any target that submits (slurm, ray, a third party's).

Importing this imports no mlflow, and no spec loader: ``DistcompBackend`` and
``compile_project`` load when first asked for (MLflow's entry point loader asks for the backend
by name, and ``mlflow run -b distcomp`` never compiles).

>>> compile_project("examples/pytorch-ddp/component.yaml", "/tmp/ddp-project")   # doctest: +SKIP
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._errors import MlflowTargetError

if TYPE_CHECKING:
    from ._backend import DistcompBackend
    from ._project import compile_project

__all__ = ["DistcompBackend", "MlflowTargetError", "compile_project"]


def __getattr__(name: str) -> Any:
    if name == "DistcompBackend":
        from ._backend import DistcompBackend

        return DistcompBackend
    if name == "compile_project":
        from ._project import compile_project

        return compile_project
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
