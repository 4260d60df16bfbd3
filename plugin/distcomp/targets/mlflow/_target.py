"""The mlflow target on the target contract: an MLflow project folder that
``mlflow run DIR -b distcomp`` runs (compile only)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

from ...core.target import Compiled, Target

if TYPE_CHECKING:
    from ...records import Plan


class MlflowTarget(Target):
    def compile(self, plan: "Plan", options: Mapping[str, Any]) -> Compiled:
        spec = plan.spec

        def write(out: Path) -> None:
            from ._project import compile_project

            compile_project(spec, out, nodes=options.get("nodes"), nproc_per_node=options.get("nproc_per_node"))

        return Compiled(kind="MLflow project", writer=write, folder=True,
                        notes=("run it with: mlflow run {out} -b distcomp --env-manager local -P NAME=VALUE",))

