"""A real two-node Slurm cluster for this package's tests (dev/slurm/cluster.sh in a tmp folder):
started by the first, stopped after the last, so it does not idle through the rest of the run.

The fixture installs nothing: `make test` runs `dev/slurm/cluster.sh install` (apt, once) before
pytest. Where the cluster cannot be had (exit 3: not root, Slurm not installed), the tests fail
with the script's reason, unless DISTCOMP_NO_SLURM=1 says this environment has no Slurm (then they skip)."""

from __future__ import annotations

import json
import os
import subprocess
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any, Iterator

import pytest

REPO = Path(__file__).resolve().parents[3]
CLUSTER = REPO / "dev" / "slurm" / "cluster.sh"
JOBS = Path(__file__).resolve().parent / "jobs"


@pytest.fixture(scope="package")
def slurm_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The cluster's folder; SLURM_CONF points at it and the venv's bin leads PATH (the ranks
    run the submitter's Python, as on a cluster whose nodes share the submitter's install)."""
    # not under pytest's private tmp folder: munged runs as user munge and must reach its socket
    folder = Path(tempfile.mkdtemp(prefix="distcomp-slurm-"))
    folder.chmod(0o755)
    proc = subprocess.run(["bash", str(CLUSTER), "start", str(folder)], capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        if os.environ.get("DISTCOMP_NO_SLURM") == "1":
            pytest.skip(f"DISTCOMP_NO_SLURM=1 and no Slurm cluster here: {proc.stderr.strip()}")
        pytest.fail(f"dev/slurm/cluster.sh start exited with {proc.returncode} (set DISTCOMP_NO_SLURM=1 where Slurm "
                    f"cannot run):\n{proc.stderr}{proc.stdout}", pytrace=False)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SLURM_CONF", str(folder / "slurm.conf"))
        mp.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
        mp.delenv("MLFLOW_TRACKING_URI", raising=False)
        mp.delenv("MLFLOW_RUN_ID", raising=False)
        try:
            yield folder
        finally:
            subprocess.run(["bash", str(CLUSTER), "stop", str(folder)], capture_output=True, text=True, timeout=120)
            shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="package")
def job_dir(slurm_cluster: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The shared job dir of the package's jobs (one SQLite MLflow store in it)."""
    return tmp_path_factory.mktemp("slurm-jobs")


def record_of(script: str) -> dict[str, Any]:
    """The node agents' record a job script writes (its here-document)."""
    start = script.index("<<'DISTCOMP_NODE_RECORD'\n") + len("<<'DISTCOMP_NODE_RECORD'\n")
    return json.loads(script[start:script.index("\nDISTCOMP_NODE_RECORD\n", start)])
