"""Only a rank itself reports its end to distcomp's rank watcher: a healthy MPI job whose rank 1
runs a child that exits 1 (a Python subprocess, as ``git describe`` outside a repository, or a
forked child), reads its code and goes on, succeeds, as under raw mpirun, and its MLflow run
is FINISHED. A rank under a wrapper of its own (a shell that does not exec it) still reports
its own failure at once. Real mpirun, real ranks, a real SQLite store."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from distcomp.agent import rankwatch

from .conftest import JOBS, clean_env

CHILDREN = JOBS / "mpi_children"


@pytest.mark.slow
@pytest.mark.parametrize("child", ["subprocess", "fork"])
def test_a_rank_whose_child_fails_goes_on_and_the_job_succeeds(tmp_path: Path, child: str) -> None:
    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    run_dir = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-m", "distcomp", "run", str(CHILDREN / "component.yaml"), "-i",
                           f"child={child}", "--run-dir", str(run_dir), "--experiment", "children", "--grace", "2"],
                          capture_output=True, text=True, timeout=180, cwd=tmp_path,
                          env={**clean_env(), "MLFLOW_TRACKING_URI": store})
    said = proc.stdout + proc.stderr
    assert proc.returncode == 0, said
    assert "rank watcher" not in said and "Traceback" not in said
    assert f"rank 1: the {child} child exited with code 1; going on" in proc.stdout
    assert list((run_dir / "rank-exits").iterdir()) == []  # nobody reported a rank's end
    results = [json.loads((run_dir / "outputs" / "result" / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert [(r["rank"], r["sum"]) for r in results] == [(0, 3), (1, 3)]
    status = json.loads((run_dir / "status.json").read_text())
    assert (status["state"], status["root_cause"]) == ("succeeded", None)

    from mlflow import MlflowClient

    client = MlflowClient(store)
    (mlrun,) = client.search_runs([client.get_experiment_by_name("children").experiment_id])
    assert mlrun.info.status == "FINISHED"


@pytest.mark.slow
def test_a_rank_under_a_shell_of_its_own_still_reports_its_failure_at_once(tmp_path: Path) -> None:
    """``sh -c 'python fail.py; exit $?'`` keeps the shell as the process mpirun started: the
    Python rank under it joined MPI, so its failure is still the rank's, seen at once."""
    spec = tmp_path / "wrapped.yaml"
    spec.write_text((JOBS / "mpi_fail" / "component.yaml").read_text().replace(
        "additional_arguments: python fail.py", "additional_arguments: sh -c 'python fail.py; exit $?'")
        + f"code: {JOBS / 'mpi_fail'}\n")
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "distcomp", "run", str(spec), "--no-tracking", "--run-dir",
                           str(tmp_path / "run"), "--grace", "2"], capture_output=True, text=True, timeout=120,
                          cwd=tmp_path, env=clean_env())
    took = time.monotonic() - start
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert took < 20, f"rank 0's 60 s sleep was not stopped at once ({took:.1f} s)"  # 60 s or a few: no timing
    assert "rank 1 exited with code 3 (seen by distcomp's rank watcher" in proc.stderr


# -- the watcher alone, on plain processes: what the rank's children do is not the rank's end ----

def _watch(tmp_path: Path, code: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    folder = tmp_path / "exits"
    folder.mkdir()
    env = {**os.environ, rankwatch.ENV: str(folder), "OMPI_COMM_WORLD_RANK": "1"}
    proc = subprocess.run([sys.executable, rankwatch.__file__, sys.executable, "-c", code], env=env,
                          capture_output=True, text=True, timeout=60)
    return proc, folder


@pytest.mark.parametrize("code", [
    "import subprocess, sys; assert subprocess.run([sys.executable, '-c', 'import sys; sys.exit(1)']).returncode == 1",
    "import subprocess, sys; assert subprocess.run([sys.executable, '-c', 'raise ValueError']).returncode == 1",
    "import os, sys\npid = os.fork()\nif pid == 0: sys.exit(1)\nassert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 1",
    "import os\npid = os.fork()\nif pid == 0: raise ValueError('in the child')\n"
    "assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 1",
], ids=["subprocess-exit", "subprocess-raise", "fork-exit", "fork-raise"])
def test_a_child_of_the_rank_that_fails_is_not_reported(tmp_path: Path, code: str) -> None:
    proc, folder = _watch(tmp_path, code)
    assert proc.returncode == 0, proc.stderr
    assert list(folder.iterdir()) == []


def test_the_rank_itself_still_reports_after_a_child_failed(tmp_path: Path) -> None:
    """The rank's own exit is its own, through an exec too (its pid is the one the watcher started)."""
    code = ("import os, subprocess, sys; subprocess.run([sys.executable, '-c', 'import sys; sys.exit(1)']); "
            "os.execv(sys.executable, [sys.executable, '-c', 'import sys; sys.exit(5)'])")
    proc, folder = _watch(tmp_path, code)
    assert proc.returncode == 5
    data = json.loads((folder / "rank1.json").read_text())
    assert (data["rank"], data["exit_code"]) == (1, 5)
