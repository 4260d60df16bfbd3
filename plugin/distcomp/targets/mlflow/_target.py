"""The mlflow target on the target contract: an MLflow project folder that
``mlflow run DIR -b distcomp`` runs (compile only)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

from ...core.target import Compiled

if TYPE_CHECKING:
    from ...spec import ComponentSpec


class MlflowTarget:
    def compile(self, spec: "ComponentSpec", options: Mapping[str, Any]) -> Compiled:
        def write(out: Path) -> None:
            from ._project import compile_project

            compile_project(spec, out, nodes=options.get("nodes"), nproc_per_node=options.get("nproc_per_node"))

        return Compiled(kind="MLflow project", writer=write, folder=True,
                        notes=("run it with: mlflow run {out} -b distcomp --env-manager local -P NAME=VALUE",))

