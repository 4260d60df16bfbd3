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
                        text=to_yaml(c), writer=write, notes=(*compiled.notes, *restart_notes(plan)), data=c)


def restart_notes(plan: "Plan") -> tuple[str, ...]:
    """Azure ML starts a failed command job or command step only once: retry_settings
    (max_retries) is a parallel step's alone in azure-ai-ml's schemas, and this target writes a
    command component. So ``max_restarts`` cannot be placed, and the compile says so."""
    k = plan.max_restarts
    if not k:
        return ()
    return (f"warning: max_restarts {k} is not applied: this is a command component, and Azure ML does not start "
            "a failed command job again (azure-ai-ml's schemas give retry_settings to parallel steps only); "
            "resubmit the job, which can resume from a checkpoint it wrote to an output",)
