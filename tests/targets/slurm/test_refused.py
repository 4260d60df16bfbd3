"""A job the slurm target refuses makes no MLflow run: real ``distcomp submit --target slurm``
against the real cluster, of a job of a third-party plugin's launcher (installed as pip leaves
one), which Slurm refuses (a partition it does not have). It exits 2 with the reason, and
leaves no run (let alone a RUNNING one) in the store that exists, and no job folder."""

from __future__ import annotations

import pytest
import subprocess
import sys
from pathlib import Path

from mlflow import MlflowClient

from ..._dists import install
from ...test_plugins import FAKE_PLUGIN
from .._jobs import clean_env


@pytest.mark.slow
def test_a_job_slurm_refuses_makes_no_run(slurm_cluster: Path, tmp_path: Path) -> None:
    site = tmp_path / "site"
    install(site, "fakelauncher", "fakelauncher", FAKE_PLUGIN, "[distcomp]\nfake = fakelauncher\n")
    code = tmp_path / "code"
    code.mkdir()
    (code / "component.yaml").write_text("name: plugged\ntype: DistributedComponent\nlauncher:\n  type: fake\n"
                                         "  additional_arguments: python -c pass\n")
    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(store)
    client.search_experiments()  # the store exists before: a run made in it would be seen
    job_dir = tmp_path / "jobs"
    proc = subprocess.run([sys.executable, "-m", "distcomp", "submit", str(code / "component.yaml"), "--target",
                           "slurm", "--job-dir", str(job_dir), "--partition", "nope"], cwd=tmp_path, capture_output=True, text=True,
                          env=clean_env(PYTHONPATH=str(site), MLFLOW_TRACKING_URI=store), timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == (
        "distcomp submit: Slurm refused the job: sbatch: error: invalid partition specified: nope; "
        "allocation failure: Invalid partition name specified")
    assert "MLflow run" not in proc.stderr and proc.stdout == ""
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
    assert [(r.info.run_id, r.info.status) for r in runs] == []
    assert not job_dir.exists() or not any(p.name != ".ids" for p in job_dir.iterdir())
