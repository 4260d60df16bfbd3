"""The first failing MPI rank ends the job: rank 1 fails while rank 0 sleeps 60 s, and the job
ends at once (mpirun alone waits for rank 0: mpi4py's MPI_Finalize at exit waits for every rank),
under distcomp's own mpirun and under the user's own mpirun line alike. The root cause names
rank 1 and shows its last lines; no process of the job is left. The watcher that sees it
(``distcomp.agent.rankwatch``) is also tested alone, on plain processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from distcomp.agent import rankwatch

from .conftest import JOBS, clean_env

FAIL = JOBS / "mpi_fail"
MARK = "DISTCOMP_MPI_FAIL_TEST"


def _marked(mark: str) -> list[int]:
    """Live processes whose environment carries ``MARK=mark`` (every process of the job has it)."""
    needle = f"\0{MARK}={mark}\0".encode()
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) != os.getpid():
            try:
                with open(f"/proc/{name}/environ", "rb") as f:
                    marked = needle in b"\0" + f.read()
                with open(f"/proc/{name}/stat", "rb") as f:
                    live = f.read().rsplit(b")", 1)[1].split()[0] not in (b"Z", b"X")
            except OSError:
                continue
            if marked and live:
                found.append(int(name))
    return found


@pytest.mark.slow
@pytest.mark.parametrize("spec", ["component.yaml", "own.yaml"], ids=["distcomp-mpirun", "own-mpirun"])
def test_the_first_failing_rank_ends_the_job(tmp_path: Path, spec: str) -> None:
    mark = uuid.uuid4().hex
    run_dir = tmp_path / "run"
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "distcomp", "run", str(FAIL / spec), "--no-tracking", "--run-dir",
                           str(run_dir), "--grace", "2"], capture_output=True, text=True, timeout=120, cwd=tmp_path,
                          env={**clean_env(), MARK: mark})
    took = time.monotonic() - start
    said = proc.stdout + proc.stderr
    assert proc.returncode == 1, said
    assert took < 20, f"the job ran {took:.1f} s: rank 0's 60 s sleep was not stopped at once\n{said}"  # not a timing: 60 s or 2 s
    assert "Traceback" not in proc.stderr
    assert "job failed: rank1 (rank, node " in proc.stderr and "exited with code 3" in proc.stderr, said
    assert "rank 1 exited with code 3 (seen by distcomp's rank watcher" in proc.stderr
    assert "rank 1: shard 7 is corrupt, giving up" in proc.stderr.split("last lines of", 1)[1]  # its last lines
    status = json.loads((run_dir / "status.json").read_text())
    assert (status["state"], status["root_cause"]["name"], status["root_cause"]["returncode"]) == (
        "failed", "rank1", 3), status["root_cause"]
    left = _marked(mark)
    for pid in left:  # never leave them to the next test
        os.kill(pid, signal.SIGKILL)
    assert left == [], f"processes of the job outlived it: {left}"


# -- the watcher alone: Open MPI starts it as `WATCHER PROGRAM ARGS...` with the rank's env ------

def _watch(tmp_path: Path, code: str, rank: str = "5") -> tuple[subprocess.CompletedProcess[str], Path]:
    folder = tmp_path / "exits"
    folder.mkdir(exist_ok=True)
    env = {**os.environ, rankwatch.ENV: str(folder), "OMPI_COMM_WORLD_RANK": rank}
    proc = subprocess.run([sys.executable, rankwatch.__file__, sys.executable, "-c", code], env=env,
                          capture_output=True, text=True, timeout=60)
    return proc, folder / f"rank{rank}.json"


@pytest.mark.parametrize("code, exit_code, signum", [
    ("import os; os._exit(4)", 4, None),  # no Python exit handlers: seen from outside
    ("import os, signal; os.kill(os.getpid(), signal.SIGKILL)", None, 9),
    ("raise ValueError('bad shard')", 1, None),  # seen from inside, before MPI_Finalize would wait
    ("import sys; sys.exit(3)", 3, None),
])
def test_the_watcher_reports_a_rank_that_failed(tmp_path: Path, code: str, exit_code: int | None,
                                                signum: int | None) -> None:
    proc, report = _watch(tmp_path, code)
    assert proc.returncode == (exit_code if signum is None else -signum), proc.stderr  # it ends as the rank did
    data = json.loads(report.read_text())
    assert (data["rank"], data["exit_code"], data["signal"]) == (5, exit_code, signum)
    assert rankwatch.first_failure(str(report.parent)) == data


@pytest.mark.parametrize("code", ["pass", "import sys; sys.exit(0)", "import sys; sys.exit(None)"])
def test_a_rank_that_ends_well_is_not_reported(tmp_path: Path, code: str) -> None:
    proc, report = _watch(tmp_path, code)
    assert proc.returncode == 0 and not report.exists(), proc.stderr


def test_a_rank_stopped_by_a_signal_is_not_a_failure(tmp_path: Path) -> None:
    """mpirun stops the ranks with SIGTERM when the job ends: passed on to the rank, not reported."""
    folder = tmp_path / "exits"
    folder.mkdir()
    env = {**os.environ, rankwatch.ENV: str(folder), "OMPI_COMM_WORLD_RANK": "0"}
    watcher = subprocess.Popen([sys.executable, rankwatch.__file__, sys.executable, "-c",
                                "import time; print('up', flush=True); time.sleep(60)"], env=env,
                               stdout=subprocess.PIPE, text=True)
    assert watcher.stdout is not None and watcher.stdout.readline() == "up\n"
    watcher.send_signal(signal.SIGTERM)
    assert watcher.wait(30) == -signal.SIGTERM
    assert list(folder.iterdir()) == []


def test_the_earliest_failure_counts_and_zero_or_greater_counts_only_a_signal(tmp_path: Path) -> None:
    folder = str(tmp_path)
    (tmp_path / "rank1.json").write_text(json.dumps({"rank": 1, "exit_code": 3, "signal": None, "ended": 1.0}))
    assert rankwatch.first_failure(folder, zero_or_greater=True) is None
    assert (rankwatch.first_failure(folder) or {}).get("rank") == 1
    (tmp_path / "rank0.json").write_text(json.dumps({"rank": 0, "exit_code": None, "signal": 9, "ended": 0.5}))
    assert (rankwatch.first_failure(folder, zero_or_greater=True) or {}).get("rank") == 0
    assert (rankwatch.first_failure(folder) or {}).get("rank") == 0  # the earliest


def test_a_users_own_exec_agent_wins() -> None:
    assert rankwatch.hook_env(rankwatch.EXEC_AGENT, "/x", {"PRTE_MCA_odls_base_exec_agent": "valgrind"}) == {}
    env = rankwatch.hook_env(rankwatch.EXEC_AGENT, "/x", {})
    assert env[rankwatch.ENV] == "/x" and env["PRTE_MCA_odls_base_exec_agent"].split() == [
        sys.executable, "-I", "-S", rankwatch.__file__]
