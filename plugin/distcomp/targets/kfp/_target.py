"""The kfp target on the target contract: a KFP v2 component file (compile only; a pipeline
runs it)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

from ...errors import UsageError
from ...core.target import Compiled, Target

if TYPE_CHECKING:
    from ...records import Plan
    from ...spec import ComponentSpec


class KfpTarget(Target):
    def has_gpu(self, spec: "ComponentSpec", options: Mapping[str, Any]) -> bool | None:
        """The step's pods run on the cluster, not this machine: no GPU advice from here."""
        return False

    def compile(self, plan: "Plan", options: Mapping[str, Any]) -> Compiled:
        spec = plan.spec
        volume = None
        if options.get("volume"):
            claim, sep, path = str(options["volume"]).partition(":")
            if not sep or not claim or not path:
                raise UsageError(f"--volume {options['volume']!r}: expected CLAIM:PATH (a PersistentVolumeClaim "
                                 "and its mount path)")
            volume = (claim, path)
        from ._errors import FLAGS, asked

        with asked(FLAGS):  # the target contract's callers give flags: errors name them
            job_options = _job_options(options.get("job_options"))
        code_path = options.get("code_path")
        if code_path is not None and not str(code_path).startswith("/"):
            raise UsageError(f"--code-path {code_path!r}: give the code folder's absolute path inside the image "
                             "(e.g. /app), where the step runs")
        from ._image import check_step_image, step_image_note

        notes = step_image_note(spec, options)
        if plan.max_restarts:
            k = plan.max_restarts
            notes = (*notes, f"the step's task retries a failed step up to {k} time(s), the whole step and every "
                     f"node (retryPolicy.maxRetryCount {k}); a pipeline that loads this file with "
                     f"load_component_from_file sets it on its task: task.set_retry(num_retries={k}) "
                     "(distcomp.kfp.load_component's tasks have it)")

        def write(out: Path) -> None:
            from ._component import load_component, write_component
            from ._errors import KfpTargetError

            with asked(FLAGS):  # every check first: a refused spec leaves no folder behind
                component = load_component(spec, nodes=options.get("nodes"), nproc_per_node=options.get("nproc_per_node"),
                                           image=options.get("image"), shared_volume=volume, code_path=code_path,
                                           job_options=job_options, max_restarts=plan.max_restarts)
                check_step_image(spec, options)  # after the spec's own problems, which come first
            try:
                out.parent.mkdir(parents=True, exist_ok=True)
                write_component(component, out)
            except OSError as exc:
                raise KfpTargetError(f"{out}: cannot write the component: {exc.strerror or exc}") from None

        return Compiled(kind="KFP component", writer=write, suffixes=(".yaml", ".yml"), notes=notes)


def _job_options(given: Any) -> Mapping[str, Any] | None:
    """``--job-option NAME=VALUE`` words (or a mapping from Python) as the kubeflow target's
    options."""
    from ._joboptions import from_texts

    if not given:
        return None
    if isinstance(given, Mapping):
        return given
    return from_texts([str(w) for w in given])
