"""``distcomp compile --target kubeflow``: a ComponentSpec as one Kubeflow training job manifest.

Pure: reads the spec, writes nothing. The job kind is the launcher's native mapping on
platform ``kubeflow`` (``distcomp_native_mappings``), else distcomp's node agent in one pod per
node, so a new launcher needs no change here."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Mapping

from ...records import JobOptions, KubeflowJobType
from ._errors import CompileError

if TYPE_CHECKING:
    from ...core.plugins import PluginManager
    from ...records import Plan
    from ...spec import ComponentSpec
    from ._settings import JobSettings

# a pod is named JOB-worker-N and gets a service of that name: a DNS-1123 label of <= 63
_NAME = re.compile(r"[a-z]([-a-z0-9]{0,38}[a-z0-9])?\Z")
# a PersistentVolumeClaim's name: a DNS-1123 subdomain
_CLAIM = re.compile(r"(?=.{1,253}\Z)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\Z")


def job_name(name: str | None, spec: "ComponentSpec") -> str:
    if name is None:
        name = re.sub(r"[^a-z0-9-]+", "-", spec.name.lower()).strip("-")[:40].strip("-") or "distcomp-job"
        if not name[0].isalpha():
            name = "job-" + name[:36]
    if not _NAME.match(name):
        raise CompileError(f"job name {name!r}: use 1-40 lowercase letters, digits and '-', starting with a letter "
                           "and ending with a letter or digit (pods and services are named after it)")
    return name


def compile_job(plan: "Plan", values: Mapping[str, Any], outputs: Mapping[str, str], *,
                pm: "PluginManager", image: str | None = None, name: str | None = None,
                namespace: str | None = None, env: Mapping[str, str] | None = None,
                trainer_v2: bool = False, workdir: str | None = None,
                resources: Mapping[str, Any] | None = None,
                volumes: Mapping[str, str] | None = None, settings: "JobSettings | None" = None) -> dict[str, Any]:
    """The manifest (a dict) of the job of ``plan`` (the core's: node overrides applied).
    ``volumes``: PVC claim name -> mount path, in every pod. ``settings``: each replica's
    resources and shared memory (default: the spec's, /dev/shm for torch-style jobs)."""
    from ._settings import JobSettings, apply
    from .jobs import builder

    spec = plan.spec

    image = image or (spec.environment.image if spec.environment else None)
    if not image:
        raise CompileError(f"{spec.ref}: its environment names no image; pass --image IMAGE "
                           "(an image holding the component's code and its dependencies)")
    for claim, path in (volumes or {}).items():
        if not _CLAIM.match(claim) or not path.startswith("/"):
            raise CompileError(f"volume {claim}:{path}: give a PersistentVolumeClaim's name and an absolute mount "
                               "path (CLAIM:/PATH)")
    job = job_type(pm, plan.launcher, trainer_v2)
    options = JobOptions(name=job_name(name, spec), image=image, command=tuple(spec.render(values, outputs)),
                         namespace=namespace, env=dict(env or {}), workdir=workdir, resources=dict(resources or {}),
                         volumes=dict(volumes or {}), topology=plan.topology, job=job, own=plan.own,
                         system_metrics_interval=plan.system_metrics_interval)
    return apply(dict(builder(job)(spec, options)), spec, settings or JobSettings(), plan.topology)


def job_type(pm: "PluginManager", launcher: str, trainer_v2: bool = False) -> KubeflowJobType:
    """The launcher's native Kubeflow job (its ``kubeflow`` mappings: the one naming a Trainer v2
    runtime when ``trainer_v2``, else another if it has one), else, for a launcher that has none,
    distcomp's node agent in one pod per node (``_agentjob``): every launcher compiles."""
    from ...core.kinds import KUBEFLOW, kubeflow_job

    mappings = pm.native_mappings(KUBEFLOW, launcher)
    # a Trainer v2 job is one that names its runtime (the mapping says so, whatever its kind)
    trainer = [m for m in mappings if "runtime" in m.options]
    if trainer_v2:
        if not trainer:
            kinds = ", ".join(sorted(m.kind for m in mappings)) or "no Kubeflow job of its own"
            raise CompileError(f"launcher {launcher!r} has no Kubeflow Trainer v2 TrainJob (it has: {kinds}); "
                               "drop --trainer-v2")
        return kubeflow_job(trainer[0])
    classic = [m for m in mappings if "runtime" not in m.options] or list(mappings)
    if not classic:
        from ._agentjob import agentjob_type

        return agentjob_type(launcher)
    return kubeflow_job(classic[0])
