"""Seed 003's MPI slots on Ray: the job's plan gives each node the slots its GPUs make (one
node: Ray cannot start mpirun's ranks on other nodes), and an -np over them is refused with the
same numbers as on every other target."""

from __future__ import annotations

import json
from pathlib import Path

from .conftest import distcomp, one_line, ray_env

OWN = Path(__file__).resolve().parents[2] / "launchers" / "jobs" / "own"
BARE = """command: python mpi_rank.py --out ${{outputs.out}}
outputs: {out: {type: uri_folder}}
distributed: {mpi: {worker: {count: 1}}}
compute: {instance_type: Standard_NC24}
"""


def test_the_slots_of_a_gpu_node_make_the_ray_jobs_world(tmp_path: Path) -> None:
    (tmp_path / "c.yaml").write_text(BARE)
    proc = distcomp(ray_env(None, tmp_path), "compile", "c.yaml", "--target", "ray", "--output",
                    f"out={tmp_path / 'o'}", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    job = json.loads(proc.stdout)
    record = job["node_record"]
    assert (record["nodes"], record["world_size"]) == (1, 4)  # Standard_NC24: 4 GPUs, 4 slots, 4 ranks
    assert record["files"]["hostfile"] == "{{node:0}} slots=4\n"
    assert job["placement_group"]["bundles"] == [{"CPU": 1.0, "GPU": 4.0}]


def test_an_np_over_the_slots_is_refused_on_ray_too(tmp_path: Path) -> None:
    proc = distcomp(ray_env(None, tmp_path), "compile", str(OWN / "seed-mpi-gpus.yaml"), "--target", "ray",
                    "--nodes", "1", "--output", f"out={tmp_path / 'o'}", cwd=tmp_path)
    one_line(proc, "mpirun asks for 16 processes (-np 16), but the spec's 1 node(s) x 4 slot(s) (instance_type "
                   "Standard_NC24: 4 GPU(s)) make 4", "lower -np to 4")
