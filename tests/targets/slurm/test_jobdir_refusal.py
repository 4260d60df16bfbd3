"""A ``--job-dir`` or an ``--output`` no job may write is refused by the core's one output-path
rule before anything of the job exists (issue 33): real ``distcomp submit --target slurm``
against the real cluster, whose ``sbatch --test-only`` accepts the job, so only the rule stands
between it and a job folder, an MLflow store and a FAILED run. Exit 2, one line naming
``--job-dir`` (never ``--run-dir``), no store, no run."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

from .._jobs import clean_env


@pytest.mark.slow
def test_a_bad_job_dir_or_output_makes_no_store_and_no_run(slurm_cluster: Path, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from distcomp.registry import open_registry

    comp = tmp_path / "comp"
    shutil.copytree(REPO / "examples" / "first-step", comp)
    registry = tmp_path / "registry"
    version = Path(open_registry(str(registry)).publish(comp).location)
    store = tmp_path / "mlflow.db"
    env = clean_env(MLFLOW_TRACKING_URI=f"sqlite:///{store}", DISTCOMP_REGISTRY=str(registry))
    jobs = tmp_path / "jobs"
    cases = (
        (["--job-dir", "/proc/1/x"], "job dir /proc/1/x is inside the system folder /proc; give --job-dir a folder "
                                     "of its own"),
        (["--job-dir", str(registry / "jobs")], f"job dir {registry / 'jobs'} is inside the component registry at "
                                                f"{registry}, which no job may change; give --job-dir a folder outside "
                                                "the registry"),
        (["--job-dir", str(jobs), "--output", f"result={version / 'out'}"],
         f"output 'result' (AnyDirectory) at {version / 'out'} is inside the component registry at {registry}, which "
         "no job may change; give --output result=PATH outside the registry"),
    )
    for args, line in cases:
        proc = subprocess.run([sys.executable, "-m", "distcomp", "submit", str(comp / "component.yaml"), "--target",
                               "slurm", *args], cwd=tmp_path, capture_output=True, text=True, env=env, timeout=120)
        assert (proc.returncode, proc.stdout, proc.stderr) == (2, "", f"distcomp submit: {line}\n"), proc.stderr
    assert not store.exists() and not jobs.exists() and not (registry / "jobs").exists()
    assert not (version / "out").exists()
