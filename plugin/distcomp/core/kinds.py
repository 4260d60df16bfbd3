"""Native mappings: how a launcher runs natively on a platform, declared as data.

Every launcher runs on every target: a target with no native mapping for it runs the
launcher's Topology with distcomp's node agent, one per node. A native mapping is an
optimisation a launcher plugin yields from the one generic hook ``distcomp_native_mappings``:
``NativeMapping(launcher, platform, kind, options)``, e.g. ``("torch.distributed", "kubeflow",
"PyTorchJob")`` or ``("mpi", "azureml", "mpi")``. A target asks the plugin manager for those of
its own platform (``pm.native_mapping(platform, launcher)``) and reads the kind and options; it
never asks which launcher it is. A new platform needs no new hook: its target names a platform
and reads the mappings launchers give for it.

What a platform's kind and options mean is the platform's (its target's) business; the ones
distcomp's targets read:

- ``kubeflow``: ``kind`` a Kubeflow job kind. distcomp builds ``PyTorchJob``, ``MPIJob``,
  ``TFJob`` and ``TrainJob`` itself (their API facts are below); options: ``runtime`` (the
  Trainer v2 runtime a ``TrainJob`` names, what ``--trainer-v2`` picks), and, for a kind of a
  plugin's own, ``build(spec, options)`` returning the manifest, ``api_version``, ``plural``
  and ``leader`` (see ``distcomp.records.KubeflowJobType``).
- ``azureml``: ``kind`` an Azure ML distribution type (``pytorch``, ``mpi``, ``tensorflow``,
  ``ray``); options: fields of that distribution, over what the target derives from the job's
  plan (``process_count_per_instance``; ``worker_count`` and ``parameter_server_count``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping

from ..records import KubeflowJobType

__all__ = ["AZUREML", "KUBEFLOW", "KUBEFLOW_KINDS", "NativeMapping", "check", "kubeflow_job"]

KUBEFLOW = "kubeflow"
AZUREML = "azureml"

_PLATFORM = re.compile(r"^[a-z][a-z0-9_.-]*\Z")

# the operators label each pod with its job's name and its replica (training-operator v1, mpi-operator)
_JOB = "training.kubeflow.org/job-name={name}"
# the Kubeflow kinds distcomp builds: what ``distcomp submit`` needs to create and follow one
# (API version, plural, the label selector of the pod whose log tells the job's story)
KUBEFLOW_KINDS: Mapping[str, Mapping[str, str]] = MappingProxyType({
    "PyTorchJob": {"api_version": "kubeflow.org/v1", "plural": "pytorchjobs",
                   "leader": f"{_JOB},training.kubeflow.org/replica-type=master"},
    "MPIJob": {"api_version": "kubeflow.org/v2beta1", "plural": "mpijobs",
               "leader": f"{_JOB},training.kubeflow.org/job-role=launcher"},
    "TFJob": {"api_version": "kubeflow.org/v1", "plural": "tfjobs",
              "leader": f"{_JOB},training.kubeflow.org/replica-type in (chief,worker),"
                        "training.kubeflow.org/replica-index=0"},
    "TrainJob": {"api_version": "trainer.kubeflow.org/v1alpha1", "plural": "trainjobs",
                 "leader": "jobset.sigs.k8s.io/jobset-name={name},batch.kubernetes.io/job-completion-index=0"},
})
_KUBEFLOW_OPTIONS = ("api_version", "build", "leader", "plural", "runtime")


@dataclass(frozen=True)
class NativeMapping:
    """How launcher ``launcher`` (its canonical name) runs natively on ``platform``: the
    platform's ``kind`` and its ``options`` (plain data the platform's target reads)."""

    launcher: str
    platform: str  # "kubeflow", "azureml", ... : the target that reads it
    kind: str  # the platform's native kind: "PyTorchJob", "pytorch", ...
    options: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}), hash=False)

    def __post_init__(self) -> None:
        for name in ("launcher", "platform", "kind"):
            if not isinstance(getattr(self, name), str) or not getattr(self, name):
                raise ValueError(f"NativeMapping: {name} must be a non-empty string (got {getattr(self, name)!r})")
        if not _PLATFORM.match(self.platform):
            raise ValueError(f"NativeMapping {self.launcher}: platform {self.platform!r} must be a lowercase name "
                             f"(e.g. {KUBEFLOW!r}, {AZUREML!r})")
        if not isinstance(self.options, Mapping) or not all(isinstance(k, str) for k in self.options):
            raise ValueError(f"{self}: options must be a mapping with string keys")
        object.__setattr__(self, "options", MappingProxyType(dict(self.options)))

    def __str__(self) -> str:
        return f"the {self.platform} {self.kind} mapping of launcher {self.launcher!r}"


def kubeflow_job(mapping: NativeMapping) -> KubeflowJobType:
    """The Kubeflow target's record of a ``kubeflow`` mapping: its options over the API facts of
    a kind distcomp builds. ValueError: options the record cannot take."""
    options = dict(mapping.options)
    unknown = sorted(set(options) - set(_KUBEFLOW_OPTIONS))
    if unknown:
        raise ValueError(f"{mapping}: unknown option(s) {', '.join(unknown)} (known: {', '.join(_KUBEFLOW_OPTIONS)})")
    facts: dict[str, Any] = dict(KUBEFLOW_KINDS.get(mapping.kind, {}))
    if options.get("api_version", facts.get("api_version")) != facts.get("api_version"):
        facts = {}  # a kind of the same name in another API group is not distcomp's
    facts.update(options)
    try:
        return KubeflowJobType(mapping.launcher, mapping.kind, facts.get("build"), api_version=facts.get("api_version", ""),
                               plural=facts.get("plural", ""), leader=facts.get("leader", ""),
                               runtime=facts.get("runtime"))
    except ValueError as exc:
        raise ValueError(f"{mapping}: {exc}") from None


def check(mapping: NativeMapping) -> None:
    """Refuse, when a plugin yields it, a mapping the platform's target could not read
    (ValueError): the plugin is then reported and skipped whole, as for any bad record."""
    if mapping.platform == KUBEFLOW:
        kubeflow_job(mapping)
    elif mapping.platform == AZUREML and "type" in mapping.options:
        raise ValueError(f"{mapping}: the distribution's type is the mapping's kind; drop options['type']")
