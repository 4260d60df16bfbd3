"""An elastic PyTorchJob's pods, run here: each Worker's exact container command with the env
training-operator v1.9's elastic generator gives it (PET_RDZV_BACKEND, PET_RDZV_ENDPOINT on
worker 0's service, PET_NNODES as MIN:MAX, PET_MAX_RESTARTS, PET_NPROC_PER_NODE); torchrun reads
them as its flags' defaults, the c10d rendezvous forms one world and the ranks all-reduce."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import distcomp

from ._operator import LOCALHOST, Pod, free_ports, run_pods

OWN = Path(__file__).resolve().parents[2] / "launchers" / "jobs" / "own"

SPEC = """
name: elastic-ddp
type: DistributedComponent
outputs:
  out: {type: AnyDirectory}
launcher:
  type: torch.distributed
  process_count_per_node: 2
  additional_arguments: python ddp.py --out {outputs.out}
"""


@pytest.mark.slow
def test_elastic_workers_rendezvous_and_all_reduce(tmp_path: Path, write_spec: Any) -> None:
    out = tmp_path / "out"
    manifest = distcomp.compile(str(write_spec(SPEC)), "kubeflow", image="test:1", elastic="1:2",
                                output_paths={"out": str(out)}, scratch=["out"], code="image").data
    job = manifest["metadata"]["name"]
    worker = manifest["spec"]["pytorchReplicaSpecs"]["Worker"]
    (container,) = worker["template"]["spec"]["containers"]
    port = free_ports(1)[0]  # the pytorchjob-port of worker 0's service, a free one here
    elastic = manifest["spec"]["elasticPolicy"]
    pods = [Pod(f"{job}-worker-{i}", "Worker", i, tuple(container["command"]),
                (*((e["name"], e["value"]) for e in container.get("env", ())),
                 ("PYTHONUNBUFFERED", "0"), ("PET_NPROC_PER_NODE", manifest["spec"]["nprocPerNode"]),
                 ("PET_RDZV_BACKEND", elastic["rdzvBackend"]), ("PET_RDZV_ENDPOINT", f"{LOCALHOST}:{port}"),
                 ("PET_NNODES", f"{elastic['minReplicas']}:{elastic['maxReplicas']}"),
                 ("PET_MAX_RESTARTS", str(elastic["maxRestarts"]))))
            for i in range(worker["replicas"])]
    done = run_pods(pods, OWN, tmp_path / "logs", timeout=150)
    assert set(done.codes.values()) == {0}, done.explain()
    records = [json.loads(p.read_text()) for p in sorted(out.glob("rank*.json"))]
    assert [r["rank"] for r in records] == [0, 1, 2, 3], done.explain()
    assert {(r["world"], r["sum"]) for r in records} == {(4, 10.0)}
    assert sorted((r["group_rank"], r["local_rank"]) for r in records) == [(0, 0), (0, 1), (1, 0), (1, 1)]
