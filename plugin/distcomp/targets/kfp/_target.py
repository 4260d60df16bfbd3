"""The kfp target on the target contract: a KFP v2 component file (compile only; a pipeline
runs it)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

from ...errors import UsageError
from ...target import Compiled

if TYPE_CHECKING:
    from ...spec import ComponentSpec


class KfpTarget:
    def compile(self, spec: "ComponentSpec", options: Mapping[str, Any]) -> Compiled:
        volume = None
        if options.get("volume"):
            claim, sep, path = str(options["volume"]).partition(":")
            if not sep or not claim or not path:
                raise UsageError(f"--volume {options['volume']!r}: expected CLAIM:PATH (a PersistentVolumeClaim "
                                 "and its mount path)")
            volume = (claim, path)

        def write(out: Path) -> None:
            from ._component import compile_component
            from ._errors import KfpTargetError

            try:
                out.parent.mkdir(parents=True, exist_ok=True)
                compile_component(spec, out, nodes=options.get("nodes"), nproc_per_node=options.get("nproc_per_node"),
                                  image=options.get("image"), shared_volume=volume,
                                  job_options=tuple(options.get("job_options") or ()))
            except OSError as exc:
                raise KfpTargetError(f"{out}: cannot write the component: {exc.strerror or exc}") from None

        return Compiled(kind="KFP component", writer=write, suffixes=(".yaml", ".yml"))
