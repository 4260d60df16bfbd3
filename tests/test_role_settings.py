"""Per-role settings (seed 003's TensorFlow parameter-server job: the parameter servers have
their own MAGIC, image and resources) reach that role on every target, in one layout: Azure
ML's (2 workers and 4 ps, no chief). The Plan lays them out once (``Topology.settings`` and
the replicas' env); what a target cannot hold is refused or noted."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

import distcomp
from distcomp.errors import UsageError
from distcomp.core.plan import make_plan
from distcomp.spec import loads

from .launchers.conftest import clean_env

SEED = Path(__file__).resolve().parent / "launchers" / "jobs" / "tfroles" / "job.yml"
TASKS = [("worker", 0), ("worker", 1), ("ps", 0), ("ps", 1), ("ps", 2), ("ps", 3)]


def test_the_plan_gives_the_parameter_servers_their_own_settings() -> None:
    plan = make_plan(distcomp.load(SEED))
    t = plan.topology
    assert t.roles() == {"worker": 2, "ps": 4}  # Azure ML's layout: no chief
    assert [(r.role, r.index, r.rank, r.env.get("MAGIC")) for r in t.replicas] == [
        ("worker", 0, 0, None), ("worker", 1, 1, None), *((("ps", i, None, "newnumber")) for i in range(4))]
    ps = t.settings["ps"]
    assert (dict(ps.env), ps.image, dict(ps.resources)) == (
        {"MAGIC": "newnumber"}, "docker.io/python", {"limits": {"gpu": 4, "memory": "2Gi"}})
    assert ps.source == "distributed.tensorflow.parameter_server"


def test_a_local_run_gives_each_role_its_own_env(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-m", "distcomp", "run", str(SEED), "--run-dir", str(run_dir),
                           "--no-tracking", "--timeout", "120"], capture_output=True, text=True, env=clean_env(),
                          cwd=tmp_path, timeout=200)
    assert proc.returncode == 0, proc.stderr
    reports = {p.stem: json.loads(p.read_text()) for p in (run_dir / "outputs" / "result").glob("*.json")}
    assert sorted(reports) == sorted(f"{t}-{i}" for t, i in TASKS)
    for name, report in reports.items():  # the shell's $MAGIC and the process env alike
        want = "newnumber" if name.startswith("ps-") else "number"
        assert (report["magic"], report["env"]) == (want, want), name
        assert report["cluster"] == {"worker": 2, "ps": 4}
    assert "[ps2]: ps 2: magic newnumber" in proc.stdout and "[rank1]: worker 1: magic number" in proc.stdout


@pytest.mark.slow
def test_the_tfjob_gives_each_replica_type_its_env_image_and_resources() -> None:
    from .targets.kubeflow.test_manifests import validate

    manifest = distcomp.compile(SEED, "kubeflow", scratch=["result"]).data
    validate(manifest)  # the real TFJob CRD, nothing the API server would prune
    specs = manifest["spec"]["tfReplicaSpecs"]
    assert {k: v["replicas"] for k, v in specs.items()} == {"Worker": 2, "PS": 4}
    main = {k: v["template"]["spec"]["containers"][0] for k, v in specs.items()}
    assert {k: {e["name"]: e["value"] for e in c["env"]}["MAGIC"] for k, c in main.items()} == {
        "Worker": "number", "PS": "newnumber"}
    assert {k: c["image"] for k, c in main.items()} == {"Worker": "docker.io/tensorflow", "PS": "docker.io/python"}
    assert main["PS"]["resources"] == {"limits": {"nvidia.com/gpu": 4, "memory": "2Gi"}}
    assert main["Worker"]["resources"] == {"limits": {"cpu": 4}}


def _azure_task_env(command: str, task: dict[str, Any], spaced: bool) -> str:
    """What ``$MAGIC`` is on an Azure ML process of ``task``: the component's command prelude run
    by bash with the job's variables and a TF_CONFIG as Azure writes it."""
    prelude = command.partition("esac;")[0] + "esac; "
    tf_config = json.dumps({"cluster": {"worker": ["h0:2222", "h1:2222"], "ps": ["h0:2223"]}, "task": task,
                            "environment": "cloud"}, separators=(", ", ": ") if spaced else (",", ":"))
    out = subprocess.run(["bash", "-c", prelude + 'printf %s "$MAGIC"'], capture_output=True, text=True,
                         env={"TF_CONFIG": tf_config, "MAGIC": "number", "PATH": "/usr/bin:/bin"}, check=True)
    return out.stdout


@pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore:.*:UserWarning:marshmallow")
def test_azure_ml_exports_the_role_env_where_tf_config_names_the_role(tmp_path: Path) -> None:
    from .targets.azureml.test_component import azure_load

    out = tmp_path / "component.yml"
    result = distcomp.compile(SEED, "azureml")
    result.write(out)
    component = azure_load(out)  # azure-ai-ml loads and validates it
    assert (component.distribution.worker_count, component.distribution.parameter_server_count) == (2, 4)
    doc = yaml.safe_load(out.read_text())
    assert doc["environment_variables"] == {"MLFLOW_DISABLE_TELEMETRY": "true", "MAGIC": "number"}
    for spaced in (True, False):
        assert _azure_task_env(doc["command"], {"type": "ps", "index": 0}, spaced) == "newnumber"
        assert _azure_task_env(doc["command"], {"type": "worker", "index": 1}, spaced) == "number"
    notes = " ".join(result.notes)
    assert "parameter_server: its image docker.io/python was left out" in notes
    assert "parameter_server: its resources were left out" in notes


def test_a_role_env_that_cannot_reach_its_role_alone_is_refused(tmp_path: Path) -> None:
    mpi = loads("command: python train.py\ndistributed:\n  mpi:\n    worker:\n      count: 2\n"
                "      environment_variables: {A: b}\n", base_dir=tmp_path)
    with pytest.raises(UsageError, match=r"distributed\.mpi\.worker\.environment_variables: .*launcher process"):
        make_plan(mpi)
