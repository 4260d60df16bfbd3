"""TFJob (kubeflow.org/v1): one pod per TensorFlow task (chief,
workers, parameter servers, evaluator), each given its TF_CONFIG by the operator. The task
counts come from the launcher's Topology the target passes in (``JobOptions.topology``), so they
match a local run exactly."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...records import JobOptions
from ._errors import CompileError
from ._pod import RUN_POLICY, container, escape, metadata, replica

if TYPE_CHECKING:
    from ...spec import ComponentSpec

PORT = 2222  # the operator's default "tfjob-port"
TYPES = {"chief": "Chief", "worker": "Worker", "ps": "PS", "evaluator": "Evaluator"}


def tfjob(spec: "ComponentSpec", options: JobOptions) -> dict[str, Any]:
    from ...core.plan import job_env

    env = job_env(spec, options.env)  # the spec's, --env, distcomp's rank defaults
    c = container("tensorflow", options, escape(options.command), env, [("tfjob-port", PORT)])
    roles = options.topology.roles()  # made from the spec with the compile's node overrides applied
    unknown = sorted(set(roles) - set(TYPES))
    if unknown:
        raise CompileError(f"TFJob {options.name}: a TFJob has no replica type for role(s) {', '.join(unknown)} "
                         f"(it has {', '.join(TYPES)})")
    replicas = {TYPES[role]: replica(count, c, options=options) for role, count in roles.items()}
    return {"apiVersion": "kubeflow.org/v1", "kind": "TFJob", "metadata": metadata(options, spec.name),
            "spec": {"runPolicy": dict(RUN_POLICY), "tfReplicaSpecs": replicas}}
