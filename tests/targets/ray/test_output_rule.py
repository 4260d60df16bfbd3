"""The core's one output-path rule holds for the Ray target too (issue 33): against the real
cluster, which would take the job, an ``--output`` inside a stored registry version, at ``/``
or under ``/etc`` is refused in one line before anything of the job exists (no MLflow store,
no run, no Ray job), and the stored version keeps its hash."""

from __future__ import annotations

from pathlib import Path

import pytest

from .conftest import TORCH, distcomp, one_line, ray_env


@pytest.mark.slow
def test_an_output_no_job_may_write_is_refused_before_the_job(ray_cluster: str, tmp_path: Path) -> None:
    from distcomp.registry import open_registry

    registry = tmp_path / "registry"
    store = open_registry(str(registry))
    published = store.publish(TORCH.parent)
    version = Path(published.location)
    before = {p: p.read_bytes() for p in version.rglob("*") if p.is_file()}
    env = ray_env(ray_cluster, tmp_path, DISTCOMP_REGISTRY=str(registry))
    for output, why in ((version / "out", f"is inside the component registry at {registry}, which no job may change; "
                                          "give --output result=PATH outside the registry"),
                        (Path("/"), "is a system folder; give --output result=PATH naming a folder of its own"),
                        (Path("/etc/x"), "is inside the system folder /etc")):
        proc = distcomp(env, "submit", str(TORCH), "--target", "ray", "--nodes", "2", "--output",
                        f"result={output}", cwd=tmp_path, timeout=120)
        one_line(proc, f"output 'result' (AnyDirectory) at {output} {why}")
        assert "MLflow run" not in proc.stderr and proc.stdout == ""
    assert {p: p.read_bytes() for p in version.rglob("*") if p.is_file()} == before
    assert not (tmp_path / "mlflow.db").exists() and not Path("/etc/x").exists()
    store.resolve(f"{published.name}@{published.version}")  # its content hash still holds
