"""DeepSpeed: the torch.distributed contract, which ``deepspeed.init_distributed`` reads."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING

from ..base.launchernames import BUILTIN
from ..core.hookspec import hookimpl
from ..records import LauncherType, Topology
from .torch import rank_topology

if TYPE_CHECKING:
    from ..spec import ComponentSpec

NAME = "deepspeed"


def deepspeed_topology(spec: "ComponentSpec") -> Topology:
    topology = rank_topology(spec, NAME)
    if Path("/dev/nvidiactl").exists():
        return topology
    # without a GPU, say so rather than let DeepSpeed probe for one and warn on every rank
    return dataclasses.replace(topology, local_env={**topology.local_env, "DS_ACCELERATOR": "cpu"})


@hookimpl
def distcomp_launchers():  # type: ignore[no-untyped-def]
    yield LauncherType(name=NAME, factory=deepspeed_topology, aliases=BUILTIN[NAME],
                       description="DeepSpeed: the torch.distributed env; init_distributed() discovers it")


@hookimpl
def distcomp_native_mappings():  # type: ignore[no-untyped-def]
    from ..core.kinds import AZUREML, KUBEFLOW, NativeMapping

    # DeepSpeed ranks read the torch.distributed contract: the same jobs as torch, and on Azure
    # ML the pytorch distribution, as its documentation advises for DeepSpeed
    yield NativeMapping(NAME, KUBEFLOW, "PyTorchJob")
    yield NativeMapping(NAME, KUBEFLOW, "TrainJob", {"runtime": "deepspeed-distributed"})
    yield NativeMapping(NAME, AZUREML, "pytorch")
