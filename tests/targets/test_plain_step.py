"""A command without distribution (a pipeline's data-prep step) is a distcomp component too:
one process on one node, laid out by the core, run for real here and compiled for every target
as that target's plainest job; a node override is refused in one line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import distcomp
from distcomp.errors import UsageError
from distcomp.core.plan import make_plan
from distcomp.spec import NO_LAUNCHER, check_text, load
from distcomp.targets.kubeflow._job import job_of

from .kubeflow._kubelet import prepare, writable
from .kubeflow._operator import pytorchjob_pods, run_pods
from .kubeflow.test_manifests import validate

STEP = Path(__file__).parent / "plainstep"
JOB = STEP / "job.yml"


def distcomp_cli(*args: str, cwd: Path = STEP) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "distcomp", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=300)


def test_it_loads_as_one_process_laid_out_by_the_core() -> None:
    plan = make_plan(load(str(JOB)))
    assert plan.spec.distribution.launcher == NO_LAUNCHER and plan.provider == "distcomp"
    t = plan.topology
    assert (t.nodes, t.processes_per_node, t.world_size, len(t.replicas), t.plain) == (1, 1, 1, 1, True)
    assert make_plan(load(str(STEP.parent.parent / "spec" / "corpus" / "valid" / "v2-component.yml"))).topology.plain \
        is False  # a distributed one is not


def test_it_runs_here_for_real(tmp_path: Path) -> None:
    out = tmp_path / "prepared"
    proc = distcomp_cli("run", "job.yml", "--output", f"prepared={out}", "--run-dir", str(tmp_path / "run"),
                        "--no-tracking")
    assert proc.returncode == 0, proc.stderr
    done = json.loads((out / "prepared.json").read_text())
    # the relative `path: ./data` is the spec's folder's data/ (the command ran there), rank 0 of 1
    assert done == {"rows": 2, "data": str(STEP / "data"), "rank": 0, "world_size": 1}
    assert "none, 1 node(s) x 1 process(es)" in proc.stderr


def test_more_than_one_node_is_refused_in_one_line(tmp_path: Path) -> None:
    for args in (("run", "job.yml", "--nodes", "2", "--no-tracking", "--run-dir", str(tmp_path / "run")),
                 ("compile", "--target", "kubeflow", "job.yml", "--nodes", "2", "--image", "i:1"),
                 ("compile", "--target", "azureml", "job.yml", "--nproc-per-node", "4")):
        proc = distcomp_cli(*args)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
        assert "has no distribution: it runs as one process on one node" in proc.stderr
        assert "distribution: {type: pytorch | mpi | tensorflow}" in proc.stderr and len(proc.stderr.splitlines()) == 1
    assert not (tmp_path / "run").exists()  # nothing half-made
    with pytest.raises(UsageError, match="2 nodes would each run the whole step alone"):
        make_plan(load(str(JOB)), nodes=2)
    # the spec cannot ask for it either: instance_count without a distribution
    bad = check_text(JOB.read_text() + "resources: {instance_count: 3}\n", "job.yml", STEP)
    assert bad.spec is None
    assert "resources.instance_count: 3 nodes without a distribution" in str(bad.diagnostics[0])


@pytest.mark.slow
def test_kubeflow_runs_the_command_in_one_pod_with_its_data_in_the_code_folder(tmp_path: Path) -> None:
    """One Master, the command itself (no torchrun, no agent); `path: ./data` is the pod's
    /distcomp/code/data, where the ConfigMap puts the code folder's data/ (not /data)."""
    job = job_of(make_plan(load(str(JOB)), gpu=False), {"volumes": {"results": "/results"}, "name": "prep", "image": "python:3.11-slim"})
    configmap, manifest = job.objects()
    validate(manifest)  # the CRD's schema, nothing the API server would prune
    (master,) = manifest["spec"]["pytorchReplicaSpecs"].values()
    command = master["template"]["spec"]["containers"][0]["command"]
    assert command == ["python", "prep.py", "--data", "/distcomp/code/data", "--out",
                       "/results/distcomp/prep/outputs/prepared"]
    pods = pytorchjob_pods(manifest)
    path = ":".join([str(Path(sys.executable).parent), "/usr/bin", "/bin"])  # an image with Python and distcomp
    inits, mains = prepare(manifest, pods, tmp_path / "cluster", {configmap["metadata"]["name"]: configmap},
                           {"PATH": path})
    try:
        done = run_pods(mains, tmp_path, tmp_path / "logs", timeout=120)
        assert set(done.codes.values()) == {0}, done.explain()
    finally:
        writable(tmp_path / "cluster")
    result = json.loads((tmp_path / "cluster" / "pvc" / "results" / "distcomp" / "prep" / "outputs" / "prepared" /
                         "prepared.json").read_text())
    assert result["rows"] == 2 and result["data"].endswith("/distcomp-code/data") and result["rank"] == 0
    # without a known working folder (code in the image, no --workdir) it stays relative: the image's
    image = job_of(make_plan(load(str(JOB)), gpu=False), {"volumes": {"results": "/results"}, "code": "image", "image": "i:1"})
    assert "data" in image.manifest["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0][
        "command"]


def test_azureml_gets_a_command_job_without_distribution(tmp_path: Path) -> None:
    from azure.ai.ml import load_component

    out = tmp_path / "prep.yml"
    proc = distcomp_cli("compile", "--target", "azureml", "job.yml", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    doc = yaml.safe_load(out.read_text())
    assert "distribution" not in doc and doc["resources"] == {"instance_count": 1}
    assert doc["environment_variables"] == {"MLFLOW_DISABLE_TELEMETRY": "true"}  # distcomp's rank default, no more
    assert doc["command"] == "python prep.py --data ${{inputs.data}} --out ${{outputs.prepared}}"
    assert load_component(out)._validate().passed


def test_every_other_target_compiles_it(tmp_path: Path) -> None:
    from kfp.components import load_component_from_file

    kfp = distcomp_cli("compile", "--target", "kfp", "job.yml", "--out", str(tmp_path / "step.yaml"))
    assert kfp.returncode == 0, kfp.stderr
    assert load_component_from_file(str(tmp_path / "step.yaml")).name == "job"
    slurm = distcomp.compile(JOB, "slurm", inputs={"data": str(STEP / "data")})
    assert slurm.text is not None and "#SBATCH --nodes=1" in slurm.text and '"world_size": 1' in slurm.text
    ray = distcomp.compile(JOB, "ray", inputs={"data": str(STEP / "data")}, outputs={"prepared": str(tmp_path / "o")})
    assert ray.text is not None and "prep.py" in ray.text
    distcomp.compile(JOB, "mlflow").write(tmp_path / "project")
    assert "distcomp" in (tmp_path / "project" / "MLproject").read_text()
