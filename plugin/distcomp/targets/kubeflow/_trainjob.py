"""TrainJob (trainer.kubeflow.org/v1alpha1, Kubeflow Trainer v2 as of v2.2): the runtime the job
record names (its mapping's ``runtime`` option; ``--runtime`` another), referenced with its API group
and kind, makes the pods and gives them the PET_* variables ``torchrun`` reads; the trainer's
``resourcesPerNode`` sizes each node pod.

Pod changes go through ``runtimePatches``: Trainer v2.0's ``podSpecOverrides`` is gone, and an
API server prunes a field its CRD does not know, so a volume written there never reaches a pod."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...records import JobOptions
from ._errors import CompileError
from ._pod import env_list, escape, metadata, volume_mounts, volumes
from ._pytorchjob import node_layout

if TYPE_CHECKING:
    from ...spec import ComponentSpec

NODE = "node"  # the runtimes' replicated job and its trainer container are both named "node"
GROUP = "trainer.kubeflow.org"
RUNTIME_KINDS = ("ClusterTrainingRuntime", "TrainingRuntime")  # cluster-wide (the default), or the job's namespace
MANAGER = "distcomp.dev/compile"  # a patch is keyed by its owner, so ours never clobbers Kueue's or a webhook's


def runtime_patch(options: JobOptions) -> dict[str, Any]:
    """The ``runtimePatches`` entry that gives every node pod ``options.volumes``."""
    pod = {"volumes": volumes(options), "containers": [{"name": NODE, "volumeMounts": volume_mounts(options)}]}
    node = {"name": NODE, "template": {"spec": {"template": {"spec": pod}}}}
    return {"manager": MANAGER, "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [node]}}}}


def runtime_ref(text: str) -> dict[str, str]:
    """``runtimeRef`` for ``NAME`` (a ClusterTrainingRuntime, as Trainer's own runtimes are) or
    ``KIND/NAME`` (``TrainingRuntime/NAME``: one in the job's namespace)."""
    kind, _, name = text.rpartition("/")
    kind = kind or RUNTIME_KINDS[0]
    if kind not in RUNTIME_KINDS or not name:
        raise CompileError(f"Trainer runtime {text!r}: give NAME (a ClusterTrainingRuntime) or KIND/NAME with KIND "
                           f"one of {', '.join(RUNTIME_KINDS)}")
    return {"apiGroup": GROUP, "kind": kind, "name": name}


def node_patch(job: dict[str, Any]) -> dict[str, Any]:
    """The pod spec of distcomp's own ``runtimePatches`` entry in a TrainJob's ``spec`` (made
    when there is none): what every node pod gets beyond the runtime's template."""
    patches = job.setdefault("runtimePatches", [])
    patch = next((p for p in patches if p.get("manager") == MANAGER), None)
    if patch is None:
        patch = {"manager": MANAGER, "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [
            {"name": NODE, "template": {"spec": {"template": {"spec": {}}}}}]}}}}
        patches.append(patch)
    (node,) = patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    pod: dict[str, Any] = node["template"]["spec"]["template"]["spec"]
    return pod


def node_container(pod: dict[str, Any]) -> dict[str, Any]:
    """The trainer container's entry in a patch's pod spec (made when there is none)."""
    containers = pod.setdefault("containers", [])
    found = next((c for c in containers if c.get("name") == NODE), None)
    if found is None:
        found = {"name": NODE}
        containers.append(found)
    result: dict[str, Any] = found
    return result


def trainjob(spec: "ComponentSpec", options: JobOptions) -> dict[str, Any]:
    from ...core.plan import job_env

    env = job_env(spec, options.env)  # the spec's, --env, distcomp's rank defaults
    nodes, per_node = node_layout(options, "TrainJob")  # the Topology's: the runtime's torchrun starts them
    trainer: dict[str, Any] = {"image": options.image, "command": ["torchrun", "--no-python", *escape(options.command)],
                               "numNodes": nodes, "numProcPerNode": per_node}
    if env:
        trainer["env"] = env_list(env)
    if options.resources:
        trainer["resourcesPerNode"] = dict(options.resources)
    runtime = options.job.runtime if options.job is not None else None
    if not runtime:
        raise CompileError(f"TrainJob {options.name}: its job record names no Trainer runtime (give its native "
                           "mapping one: NativeMapping(launcher, 'kubeflow', 'TrainJob', {'runtime': 'torch-distributed'}))")
    job: dict[str, Any] = {"runtimeRef": runtime_ref(runtime), "trainer": trainer}
    if options.volumes:  # the trainer has no volumes of its own: the node pods get them as a patch
        job["runtimePatches"] = [runtime_patch(options)]
    return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "metadata": metadata(options, spec.name),
            "spec": job}
