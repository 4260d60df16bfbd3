"""What the compile's options add to a built job manifest, whatever kind built it: each
replica's resources and shared memory, then the user's partial pod template, then the job's
lifecycle (``_lifecycle``).

Applied after the kind's builder, to every ``spec.*ReplicaSpecs`` entry (the training
operators' and mpi-operator's layout, which a plugin's kind shares) or, for a TrainJob, to its
``trainer`` and distcomp's own ``runtimePatches`` entry."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping

from ._errors import CompileError
from ._lifecycle import Lifecycle, lifecycle_of
from ._lifecycle import apply as apply_lifecycle
from ._podtemplate import merge_metadata, merge_pod, merge_trainjob
from ._resources import NOT_NODES, SHM_MOUNT, ResourceOptions, replica_resources, shm_size, shm_volume

if TYPE_CHECKING:
    from ...records import Topology
    from ...spec import ComponentSpec


@dataclass(frozen=True)
class JobSettings:
    """Everything the compile's options say about the pods beyond the command."""

    resources: ResourceOptions = field(default_factory=ResourceOptions)
    pod_template: Mapping[str, Any] | None = None  # checked by _podtemplate.load: {metadata, spec}
    lifecycle: Lifecycle = field(default_factory=Lifecycle)
    runtime: str | None = None  # a TrainJob's runtime instead of its job record's: NAME or KIND/NAME


def replica_specs(manifest: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Replica type -> replica spec ({} for a kind without ``*ReplicaSpecs``)."""
    spec = manifest.get("spec") or {}
    key = next((k for k in spec if k.endswith("ReplicaSpecs")), None)
    return spec[key] if key else {}


def _resources(target: dict[str, Any], key: str, more: dict[str, dict[str, Any]]) -> None:
    if not more:
        return
    current = target.setdefault(key, {})
    for part, values in more.items():
        current.setdefault(part, {}).update(values)


def _role(main: dict[str, Any], replica_type: str, topology: "Topology | None") -> None:
    """The container of a ``replica_type`` pod with its role's own image and variables (the
    Plan's ``Topology.settings``: seed 003's ``parameter_server: {environment, environment_variables}``)."""
    from ...core.plan import replica_role
    from ._resources import ROLE_OF

    own = topology.settings.get(replica_role(ROLE_OF.get(replica_type, replica_type.lower()))) if topology else None
    if own is None:
        return
    if own.image:
        main["image"] = own.image
    if own.env:
        env = [e for e in main.get("env") or [] if e.get("name") not in own.env]
        main["env"] = [*env, *({"name": k, "value": v} for k, v in own.env.items())]


def apply(manifest: dict[str, Any], spec: "ComponentSpec", settings: JobSettings,
          topology: "Topology | None" = None) -> dict[str, Any]:
    """``manifest`` with ``settings`` applied (changed in place, and returned); ``topology``: the
    Plan's, whose per-role settings reach the pods of that role."""
    kind = manifest.get("kind", "")
    shm, size = shm_size(spec, kind, settings.resources)
    if settings.runtime and kind != "TrainJob":
        raise CompileError(f"--runtime {settings.runtime}: a {kind} has no Trainer runtime (add --trainer-v2)")
    if kind == "TrainJob":
        from ._trainjob import node_container, node_patch, runtime_ref

        if settings.runtime:
            manifest["spec"]["runtimeRef"] = runtime_ref(settings.runtime)
        _resources(manifest["spec"]["trainer"], "resourcesPerNode",
                   replica_resources(spec, "Worker", settings.resources))
        if shm:
            pod = node_patch(manifest["spec"])
            pod.setdefault("volumes", []).append(shm_volume(size))
            node_container(pod).setdefault("volumeMounts", []).append(dict(SHM_MOUNT))
        if settings.pod_template:
            merge_trainjob(manifest["spec"], settings.pod_template)
        apply_lifecycle(manifest, settings.lifecycle, {})
        return manifest
    for replica_type, replica in replica_specs(manifest).items():
        pod = replica["template"]["spec"]
        main = pod["containers"][0]  # the builders put the training container first
        _role(main, replica_type, topology)
        _resources(main, "resources", replica_resources(spec, replica_type, settings.resources))
        if shm and replica_type not in NOT_NODES:
            pod.setdefault("volumes", []).append(shm_volume(size))
            main.setdefault("volumeMounts", []).append(dict(SHM_MOUNT))
        if settings.pod_template:  # last: the user's word on the pod wins
            merge_pod(pod, settings.pod_template)
            merge_metadata(replica["template"], settings.pod_template)
    if kind == "MPIJob" and settings.pod_template:
        _forward(manifest, settings.pod_template)
    apply_lifecycle(manifest, settings.lifecycle, replica_specs(manifest))
    return manifest


def _forward(manifest: dict[str, Any], template: Mapping[str, Any]) -> None:
    """The template's env reaches MPI ranks as the spec's does: ``mpirun -x NAME`` (ranks started
    over ssh do not inherit the worker container's env). A user's own mpirun forwards its own."""
    names = [e["name"] for c in template["spec"].get("containers") or [] if "name" not in c
             for e in c.get("env") or [] if isinstance(e, Mapping) and "name" in e]
    command = replica_specs(manifest)["Launcher"]["template"]["spec"]["containers"][0]["command"]
    if not names or command[:1] != ["mpirun"] or "--map-by" not in command:
        return
    at = command.index("--map-by") + 2
    known = {command[i + 1] for i in range(at, len(command) - 1) if command[i] == "-x"}
    command[at:at] = [w for name in names if name not in known for w in ("-x", name)]


def settings_of(options: Mapping[str, Any], max_restarts: int = 0) -> JobSettings:
    """The JobSettings the target's options (``distcomp compile/submit --target kubeflow``) give;
    ``max_restarts``: the Plan's."""
    from ._podtemplate import load

    gpus = options.get("gpus_per_node")
    return JobSettings(resources=ResourceOptions(
        gpus_per_node=int(gpus) if gpus is not None else None, cpu=_text(options.get("cpu")),
        memory=_text(options.get("memory")), shm_size=_text(options.get("shm_size"))),
        pod_template=load(options.get("pod_template")), lifecycle=lifecycle_of(options, max_restarts),
        runtime=_text(options.get("runtime")))


def _text(value: Any) -> str | None:
    return None if value is None else str(value)
