"""What submit binds into a compiled Kubeflow job: the job's MLflow run, which the core creates
after the compile (``distcomp.core.target``). Nothing else of the compiled manifest changes.

- the run's env reaches every pod's training container (as the pod template's env does: over an
  entry of the same name, from the spec, ``--env`` or a template; an MPIJob's ranks get it
  through ``mpirun -x``, a TrainJob's through its trainer's env);
- the job's annotations name the run, so status from another machine finds it.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any, Mapping

from ._pod import env_list

if TYPE_CHECKING:
    from ...records import TrackingRef

RUN_ID, TRACKING_URI = "distcomp.io/mlflow-run-id", "distcomp.io/mlflow-tracking-uri"
LATE = ("the job's MLflow run, made when it is submitted: its env (MLFLOW_RUN_ID, MLFLOW_TRACKING_URI, ...) in "
        "every pod's training container, and the annotations " + RUN_ID + " and " + TRACKING_URI,)


def bind_run(manifest: Mapping[str, Any], env: Mapping[str, str],
             tracking: "TrackingRef | None") -> tuple[dict[str, Any], bool]:
    """A copy of the compiled ``manifest`` with the run bound; whether its env found the pods
    (False: a kind whose pod templates distcomp does not know)."""
    from ._podtemplate import _merge, merge_pod
    from ._settings import _forward, replica_specs

    bound = copy.deepcopy(dict(manifest))
    if tracking is not None:
        bound["metadata"].setdefault("annotations", {}).update(
            {RUN_ID: tracking.run_id, TRACKING_URI: tracking.tracking_uri})
    if not env:
        return bound, True
    template: dict[str, Any] = {"metadata": {}, "spec": {"containers": [{"env": env_list(env)}]}}
    if bound.get("kind") == "TrainJob":  # the trainer's env reaches every node's pod
        _merge(bound["spec"]["trainer"], {"env": env_list(env)})
        return bound, True
    replicas = replica_specs(bound)
    for replica in replicas.values():
        merge_pod(replica["template"]["spec"], template)
    if bound.get("kind") == "MPIJob":
        _forward(bound, template)
    return bound, bool(replicas)
