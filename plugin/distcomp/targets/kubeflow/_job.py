"""A Kubeflow job as compile and submit make it: the manifest the kind's builder writes, with
each pod's settings, the code and packages (``_code``) and where the outputs last
(``_outputs``), plus the objects submit creates beside it (the code's ConfigMap)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

from ...errors import UsageError

if TYPE_CHECKING:
    from ...records import Plan
    from ._code import CodePlan
    from ._outputs import OutputPlan


@dataclass(frozen=True)
class KubeflowJob:
    """A compiled job: its manifest, and what else submit does for it (the code, the outputs)."""

    manifest: dict[str, Any]
    code: "CodePlan"
    outputs: "OutputPlan"
    # the job's secrets, which the manifest takes by secretKeyRef (``_secretref``); None: it has none
    secret: dict[str, Any] | None = None
    restarts: tuple[str, ...] = ()  # where the checkpoint lasts, or why a restarted pod finds none

    def objects(self) -> list[dict[str, Any]]:
        """What is applied to the cluster: the code's ConfigMap first when there is one."""
        from ._code import configmap

        meta = self.manifest["metadata"]
        extra = [configmap(self.code, meta["name"], meta.get("namespace"))] if self.code.mode == "configmap" else []
        return [*extra, self.manifest]

    def notes(self) -> tuple[str, ...]:
        return (self.code.note(), *self.outputs.notes(), *self.restarts, *_mpi_env_note(self.manifest))


def _mpi_env_note(manifest: Mapping[str, Any]) -> list[str]:
    """An MPIJob's ranks start over ssh with the env ``mpirun -x`` forwards by name: an
    ``envFrom`` of the pod template reaches the pods, not the ranks; say so."""
    from ._settings import replica_specs

    if manifest.get("kind") != "MPIJob":
        return []
    worker = replica_specs(dict(manifest)).get("Worker", {}).get("template", {}).get("spec", {})
    if not any(c.get("envFrom") for c in worker.get("containers") or []):
        return []
    return ["envFrom reaches the MPIJob's pods but not the ranks mpirun starts over ssh (it forwards variables by "
            "name): give each variable as env: [{name: NAME, valueFrom: {secretKeyRef: ...}}] in the pod template, "
            "which mpirun -x forwards"]


def job_of(plan: "Plan", options: Mapping[str, Any],
           extra_env: Mapping[str, str] | None = None, code: "CodePlan | None" = None) -> KubeflowJob:
    """The job of ``plan`` that ``options`` describe (``extra_env``: e.g. the MLflow run's).
    ``code``: the plan an earlier call made for the same options (not packed and hashed again)."""
    from ...core.plugins import get_plugin_manager
    from ...base.redact import job_masker
    from ...spec import InputError, check_inputs, unknown_outputs
    from . import _secretref
    from ._code import apply as apply_code
    from ._code import plan_code
    from ._compile import compile_job, job_name
    from ._outputs import apply as apply_outputs
    from ._outputs import plan_outputs
    from ._restarts import apply as apply_restarts
    from ._restarts import plan_restarts
    from ._settings import settings_of
    from ._uris import pod_path_problems

    spec = plan.spec
    outs = dict(options.get("output_paths") or {})
    given = dict(options.get("inputs") or {})
    try:
        code = code or plan_code(spec, options, os.environ)
    except UsageError as exc:
        raise type(exc)(str(exc).replace("\n", "\n  ")) from None
    # the pod's paths, not this machine's: a relative port path (a spec's `path: ./data`) is in the
    # pod's working folder, where the command runs (the code's, or --workdir; the image's own when
    # neither is known: then it stays relative)
    pod = Path(options.get("workdir") or code.workdir or ".")
    values, problems = check_inputs(spec, given, pod, code_at=pod)  # a spec's relative default too
    # an azureml:/https:// value is no path in a pod
    problems = unknown_outputs(spec, outs) + problems + pod_path_problems(spec, values, given, outs)
    if problems:
        raise InputError("\n".join(problems))
    try:
        volumes = dict(options.get("volumes") or {})
        name = job_name(options.get("name"), spec)
        settings = settings_of(options, plan.max_restarts)
        restarts = plan_restarts(settings.lifecycle, volumes, name, "TrainJob" if options.get("trainer_v2") else "")
        outputs = plan_outputs(list(spec.outputs), outs, volumes, name, code.store, list(options.get("scratch") or ()))
        manifest = compile_job(plan, values, outputs.paths, pm=get_plugin_manager(), image=options.get("image"),
                               name=name, namespace=options.get("namespace"),
                               env={**restarts.env(), **dict(options.get("env") or {}), **(extra_env or {})},
                               trainer_v2=bool(options.get("trainer_v2")), workdir=options.get("workdir"),
                               volumes=volumes, settings=settings)
        code = _podless(manifest, code)
        apply_code(manifest, code, str(options.get("image") or ""))
        apply_outputs(manifest, outputs, code)
        apply_restarts(manifest, restarts)  # last: the counting line runs before all the rest
    except UsageError as exc:
        raise type(exc)(str(exc).replace("\n", "\n  ")) from None
    # last, when every container is built: no secret stays in clear in any of them
    secret = _secretref.apply(manifest, job_masker(spec, values, {**dict(options.get("env") or {}),
                                                                   **(extra_env or {})}))
    return KubeflowJob(manifest, code, outputs, secret, restarts.notes())


def _podless(manifest: Mapping[str, Any], code: "CodePlan") -> "CodePlan":
    """A plugin's kind without ``*ReplicaSpecs`` has no pods distcomp can mount code into."""
    from dataclasses import replace

    from ._errors import CompileError
    from ._settings import replica_specs

    if manifest.get("kind") == "TrainJob" or replica_specs(dict(manifest)) or (code.mode == "image" and
                                                                               not code.packages):
        return code
    if code.packages:
        raise CompileError(f"--packages: a {manifest.get('kind')} has no pod templates distcomp knows; install them "
                           "in the image")
    return replace(code, mode="image", why=f"a {manifest.get('kind')} has no pod templates distcomp can mount code "
                   "into", files={}, size=0, digest="", key="")
