"""TrainJob (trainer.kubeflow.org/v1alpha1, Kubeflow Trainer v2 as of v2.2): the runtime the job
record names (``KubeflowJobType.runtime``) makes the pods and gives them the PET_* variables
``torchrun`` reads.

Pod changes go through ``runtimePatches``: Trainer v2.0's ``podSpecOverrides`` is gone, and an
API server prunes a field its CRD does not know, so a volume written there never reaches a pod."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...records import JobOptions
from ._compile import CompileError
from ._pod import env_list, escape, metadata, volume_mounts, volumes

if TYPE_CHECKING:
    from ...spec import ComponentSpec

NODE = "node"  # the runtimes' replicated job and its trainer container are both named "node"
MANAGER = "distcomp.dev/compile"  # a patch is keyed by its owner, so ours never clobbers Kueue's or a webhook's


def runtime_patch(options: JobOptions) -> dict[str, Any]:
    """The ``runtimePatches`` entry that gives every node pod ``options.volumes``."""
    pod = {"volumes": volumes(options), "containers": [{"name": NODE, "volumeMounts": volume_mounts(options)}]}
    node = {"name": NODE, "template": {"spec": {"template": {"spec": pod}}}}
    return {"manager": MANAGER, "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [node]}}}}


def trainjob(spec: "ComponentSpec", options: JobOptions) -> dict[str, Any]:
    env = {**spec.environment_variables, **options.env}
    trainer: dict[str, Any] = {"image": options.image, "command": ["torchrun", "--no-python", *escape(options.command)],
                               "numNodes": options.nodes, "numProcPerNode": options.processes_per_node}
    if env:
        trainer["env"] = env_list(env)
    if options.resources:
        trainer["resourcesPerNode"] = dict(options.resources)
    runtime = options.job.runtime if options.job is not None else None
    if not runtime:
        raise CompileError(f"TrainJob {options.name}: its job record names no Trainer runtime "
                         "(KubeflowJobType(runtime=...), e.g. trainjob_type(launcher, 'torch-distributed'))")
    job: dict[str, Any] = {"runtimeRef": {"name": runtime}, "trainer": trainer}
    if options.volumes:  # the trainer has no volumes of its own: the node pods get them as a patch
        job["runtimePatches"] = [runtime_patch(options)]
    return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "metadata": metadata(options, spec.name),
            "spec": job}
