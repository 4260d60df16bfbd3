"""The azureml target on the target contract: an azure-ai-ml command component (compile only;
Azure ML runs it)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

from ...errors import UsageError
from ...core.target import Compiled, Target

if TYPE_CHECKING:
    from ...records import Plan
    from ...spec import ComponentSpec


class AzureMLTarget(Target):
    def has_gpu(self, spec: "ComponentSpec", options: Mapping[str, Any]) -> bool | None:
        """Azure ML's instances are not this machine: no GPU advice from here."""
        return False

    def compile(self, plan: "Plan", options: Mapping[str, Any]) -> Compiled:
        from ._azure import compile_component, compile_mapping, to_yaml

        if options.get("environment") and options.get("image"):
            raise UsageError("give --environment or --image, not both")
        environment, image = options.get("environment"), options.get("image")
        compiled = compile_mapping(plan, Path.cwd(), environment=environment, image=image)  # paths from here
        c = compiled.component

        def write(out: Path) -> None:  # code paths relative to the file's folder; checked by azure-ai-ml
            compile_component(plan, out, environment=environment, image=image)

        how = f"{c['distribution']['type']} distribution" if "distribution" in c else "no distribution: one process"
        return Compiled(kind=f"Azure ML command component {c['name']} ({how}, "
                             f"{c['resources']['instance_count']} instance(s))",
                        text=to_yaml(c), writer=write, notes=tuple(compiled.notes), data=c)
