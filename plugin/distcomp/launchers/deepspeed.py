"""DeepSpeed: the torch.distributed contract, which ``deepspeed.init_distributed`` reads."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING

from ..hookspec import hookimpl
from ..records import AzureMLDistribution, LauncherType, Topology
from .torch import azureml_pytorch, rank_topology

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
    yield LauncherType(name=NAME, factory=deepspeed_topology,
                       description="DeepSpeed: the torch.distributed env; init_distributed() discovers it")


@hookimpl
def distcomp_kubeflow_jobs():  # type: ignore[no-untyped-def]
    from ..kinds import pytorchjob_type, trainjob_type

    # DeepSpeed ranks read the torch.distributed contract: the same jobs as torch
    yield pytorchjob_type(NAME)
    yield trainjob_type(NAME, runtime="deepspeed-distributed")


@hookimpl
def distcomp_azureml_distributions():  # type: ignore[no-untyped-def]
    # Azure ML's advice for DeepSpeed: the PyTorch distribution, which sets the env it reads
    yield AzureMLDistribution(NAME, azureml_pytorch, "PyTorchDistribution, as Azure ML recommends for DeepSpeed")
