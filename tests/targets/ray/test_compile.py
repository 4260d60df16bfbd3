"""``distcomp compile --target ray`` is pure: the Jobs API request, one bundle per node with
the flags' and the spec's resources, the node agents' record; refusals are one line, exit 2."""

from __future__ import annotations

import json
from pathlib import Path

from .conftest import JOBS, TORCH, distcomp, one_line, ray_env

EXPECTED_BUNDLE = {"CPU": 2.0, "GPU": 1.0, "memory": 1024.0**3, "accel": 1.0}


def test_compile_prints_the_request_and_one_bundle_per_node(tmp_path: Path) -> None:
    env = ray_env(None, tmp_path)
    proc = distcomp(env, "compile", str(TORCH), "--target", "ray", "--nodes", "2", "--output",
                    f"result={tmp_path / 'out'}", "--cpus-per-node", "2", "--gpus-per-node", "1", "--memory", "1Gi",
                    "--resources", '{"accel": 1}', "--packages", "numpy", "--max-restarts", "2", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    job = json.loads(proc.stdout)
    assert job["entrypoint"] == "python -m distcomp_ray.driver"
    assert job["submission_id"] == "{{job_name}}"
    assert job["runtime_env"]["working_dir"] == str(TORCH.parent) and job["runtime_env"]["pip"] == ["numpy"]
    assert job["placement_group"]["strategy"] == "STRICT_SPREAD"
    assert job["placement_group"]["bundles"] == [EXPECTED_BUNDLE, EXPECTED_BUNDLE]
    assert job["outputs"] == {str(tmp_path / "out"): "folder"}
    assert job["max_restarts"] == 2  # the driver restarts the whole job (never Ray's own retries)
    record = job["node_record"]
    assert [(r["name"], r["node"]) for r in record["replicas"]] == [("rank0", 0), ("rank1", 1)]
    assert record["replicas"][1]["env"]["MASTER_ADDR"] == "{{host:0}}"
    assert record["node_env"] == ["DISTCOMP_RAY_NODE_INDEX"] and record["console"] is True
    assert list(tmp_path.iterdir()) == []  # nothing written: no output folder, no store
    assert not (tmp_path / "out").exists()


def test_the_spec_gpus_and_defaults_make_the_bundle(tmp_path: Path) -> None:
    spec = tmp_path / "code" / "component.yaml"
    spec.parent.mkdir()
    spec.write_text("type: command\nname: azure_sized\ncommand: python train.py\ndistribution:\n  type: pytorch\n"
                    "resources:\n  instance_count: 2\n  instance_type: Standard_NC24\n")
    proc = distcomp(ray_env(None, tmp_path), "compile", str(spec), "--target", "ray", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["placement_group"]["bundles"] == [{"CPU": 1.0, "GPU": 4.0}] * 2


def test_an_output_that_would_be_lost_is_a_compile_error(tmp_path: Path) -> None:
    proc = distcomp(ray_env(None, tmp_path), "compile", str(TORCH), "--target", "ray", cwd=tmp_path)
    one_line(proc, "output 'result' would be lost", "--output result=PATH", "every node sees")
    proc = distcomp(ray_env(None, tmp_path), "compile", str(TORCH), "--target", "ray", "--output", "result=rel/out",
                    cwd=tmp_path)
    one_line(proc, "absolute path")


def test_bad_resources_are_one_line(tmp_path: Path) -> None:
    out = f"result={tmp_path / 'out'}"
    for flags, needle in ((["--resources", "{accel"], "not JSON"), (["--resources", '{"CPU": 2}'], "--cpus-per-node"),
                          (["--memory", "lots"], "expected a size")):
        proc = distcomp(ray_env(None, tmp_path), "compile", str(TORCH), "--target", "ray", "--output", out, *flags,
                        cwd=tmp_path)
        one_line(proc, needle)


def test_mpi_over_several_nodes_is_refused_with_the_reason(tmp_path: Path) -> None:
    """mpirun reaches the other nodes itself (ssh), which Ray does not provide: refused at compile."""
    spec = JOBS.parents[1] / "slurm" / "jobs" / "mpi" / "component.yaml"
    proc = distcomp(ray_env(None, tmp_path), "compile", str(spec), "--target", "ray", "--nodes", "2", "--output",
                    f"result={tmp_path / 'out'}", cwd=tmp_path)
    one_line(proc, "starts no process of its own on node 1", "mpirun over ssh", "--nodes 1")
    # the same spec on one node: mpirun starts its ranks there itself
    proc = distcomp(ray_env(None, tmp_path), "compile", str(spec), "--target", "ray", "--nodes", "1", "--output",
                    f"result={tmp_path / 'out'}", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr


def test_the_driver_and_the_target_agree_on_the_outcome_line() -> None:
    from distcomp.targets.ray import _driver, _joblog

    assert _driver.OUTCOME == _joblog.OUTCOME


def test_the_spec_s_conda_pip_packages_go_as_runtime_env_pip(tmp_path: Path) -> None:
    code = tmp_path / "code"
    code.mkdir()
    base = "type: DistributedComponent\nname: conda_job\nlauncher: {type: torch.distributed, " \
           "additional_arguments: python train.py}\n"
    (code / "env.yml").write_text("dependencies:\n  - python=3.11\n  - pip\n  - numpy=1.26\n"
                                  "  - pip:\n      - einops==0.8.0\n      - numpy\n")
    (code / "component.yaml").write_text(base + "environment:\n  conda_file: env.yml\n")
    proc = distcomp(ray_env(None, tmp_path), "compile", str(code / "component.yaml"), "--target", "ray",
                    "--packages", "numpy", "--packages", "rich", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    # the conda file's pip list first, then --packages, each once
    assert json.loads(proc.stdout)["runtime_env"]["pip"] == ["einops==0.8.0", "numpy", "rich"]
    assert "the conda file env.yml also asks conda for numpy=1.26: runtime_env pip does not install" in proc.stderr
    (code / "component.yaml").write_text(base + "environment:\n  conda_file: missing.yml\n")
    one_line(distcomp(ray_env(None, tmp_path), "compile", str(code / "component.yaml"), "--target", "ray",
                      cwd=tmp_path), "its conda file 'missing.yml' does not exist")
