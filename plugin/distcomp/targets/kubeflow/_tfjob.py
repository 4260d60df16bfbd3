"""TFJob (kubeflow.org/v1) for tensorflow.distributed: one pod per TensorFlow task (chief,
workers, parameter servers, evaluator), each given its TF_CONFIG by the operator. The task
counts come from the launcher's own Topology, so they match a local run exactly."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...records import JobOptions
from ._pod import RUN_POLICY, container, escape, metadata, replica

if TYPE_CHECKING:
    from ...spec import ComponentSpec

PORT = 2222  # the operator's default "tfjob-port"
TYPES = {"chief": "Chief", "worker": "Worker", "ps": "PS", "evaluator": "Evaluator"}


def tfjob(spec: "ComponentSpec", options: JobOptions) -> dict[str, Any]:
    from ...launchers.tensorflow import tf_topology

    env = {**spec.environment_variables, **options.env}
    c = container("tensorflow", options, escape(options.command), env, [("tfjob-port", PORT)])
    roles = tf_topology(spec).roles()  # the spec comes with the compile's node overrides applied
    replicas = {TYPES[role]: replica(count, c, options=options) for role, count in roles.items()}
    return {"apiVersion": "kubeflow.org/v1", "kind": "TFJob", "metadata": metadata(options, spec.name),
            "spec": {"runPolicy": dict(RUN_POLICY), "tfReplicaSpecs": replicas}}
