"""Bad values for the slurm target through the real `distcomp` command and a real cluster: every
value that reaches the sbatch script is checked (exit 2, one line, nothing written), a job dir
with a space works, and sbatch's refusal leaves no job folder, no code copy and no MLflow run."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import JOBS

TORCH = JOBS / "torch" / "component.yaml"
NAME_HINT = "expected a Slurm name: letters, digits, '_', '-', '.', '+' (several separated by commas)"
MEM_HINT = ("expected a size as sbatch --mem takes it: a number of megabytes, or with a K, M, G or T suffix "
            "(16G, 16000M; 0: all)")


def distcomp(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "distcomp", *args], capture_output=True, text=True, cwd=cwd,
                          env=dict(os.environ), timeout=300)


def refused(proc: subprocess.CompletedProcess[str], line: str) -> None:
    assert "Traceback" not in proc.stderr + proc.stdout
    assert (proc.returncode, proc.stdout) == (2, ""), proc.stderr
    assert proc.stderr.splitlines() == [line]


@pytest.mark.parametrize("flags, line", [
    (["--partition", "debug\ntouch /tmp/x"], f"--partition 'debug\\ntouch /tmp/x': {NAME_HINT}"),
    (["--account", "ml\rtouch"], f"--account 'ml\\rtouch': {NAME_HINT}"),
    (["--partition", "debug;id"], f"--partition 'debug;id': {NAME_HINT}"),
    (["--mem", "16G; touch /tmp/x"], f"--mem '16G; touch /tmp/x': {MEM_HINT}"),
    (["--mem", "16Gi"], f"--mem '16Gi': {MEM_HINT}"),
    (["--sbatch=--qos=high\rtouch /tmp/x"], "--sbatch '--qos=high\\rtouch /tmp/x': give one sbatch option per "
                                            "flag, as in --sbatch=--qos=high (it becomes an #SBATCH line)"),
], ids=["partition-newline", "account-cr", "partition-semicolon", "mem-shell", "mem-kubernetes", "sbatch-cr"])
def test_a_value_that_would_change_the_script_is_refused_by_compile_and_submit(
        slurm_cluster: Path, tmp_path: Path, flags: list[str], line: str) -> None:
    jobs = tmp_path / "jobs"
    for command in ("compile", "submit"):
        refused(distcomp(command, "--target", "slurm", str(TORCH), "--job-dir", str(jobs), *flags, cwd=tmp_path),
                f"distcomp {command}: {line}")
    assert sorted(p.name for p in tmp_path.iterdir()) == []


@pytest.mark.parametrize("job_dir, why", [
    ("jobs\nx", "holds a control character (a line break, a tab, ...)"),
    ('jo"bs', "holds '\"', which sbatch's options cannot carry"),
    ("jobs%j", "holds '%', which sbatch's options cannot carry"),
])
def test_a_job_dir_sbatch_cannot_carry_is_refused(slurm_cluster: Path, tmp_path: Path, job_dir: str, why: str) -> None:
    for command in ("compile", "submit"):
        refused(distcomp(command, "--target", "slurm", str(TORCH), "--job-dir", job_dir, cwd=tmp_path),
                f"distcomp {command}: --job-dir {str(tmp_path / job_dir)!r} {why}; give a job dir whose path has none")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_a_job_dir_with_a_space_runs(slurm_cluster: Path, tmp_path: Path) -> None:
    jobs = tmp_path / "job dir"
    proc = distcomp("submit", "--target", "slurm", str(TORCH), "--nodes", "2", "--job-dir", str(jobs),
                    "--no-tracking", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    (folder,) = [p for p in jobs.iterdir() if p.name.startswith("slurm-test-torch-")]
    script = (folder / "job.sbatch").read_text()
    assert f'#SBATCH --chdir="{folder}"' in script and f'#SBATCH --output="{folder}/slurm-%j.out"' in script
    assert sorted(p.name for p in (folder / "outputs" / "result").iterdir()) == ["rank0.json", "rank1.json"]
    assert list(folder.glob("slurm-*.out"))  # sbatch's own output went where the script said


def test_a_partition_sbatch_refuses_exits_2_and_leaves_nothing(slurm_cluster: Path, tmp_path: Path) -> None:
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    store = tmp_path / "mlflow.db"
    proc = subprocess.run([sys.executable, "-m", "distcomp", "submit", "--target", "slurm", str(TORCH),
                           "--partition", "nope", "--job-dir", str(jobs)], capture_output=True, text=True,
                          cwd=tmp_path, env={**os.environ, "MLFLOW_TRACKING_URI": f"sqlite:///{store}"}, timeout=300)
    refused(proc, "distcomp submit: Slurm refused the job: sbatch: error: invalid partition specified: nope; "
                  "allocation failure: Invalid partition name specified")
    assert list(jobs.iterdir()) == []  # no job folder, no code copy
    assert not store.exists()  # MLflow was not even opened: no run, RUNNING or FAILED


def test_a_fifo_in_the_code_folder_is_refused_before_the_job_folder_exists(slurm_cluster: Path,
                                                                           tmp_path: Path) -> None:
    code = tmp_path / "comp"
    shutil.copytree(TORCH.parent, code)
    os.mkfifo(code / "pipe")
    jobs = tmp_path / "jobs"
    proc = distcomp("submit", "--target", "slurm", str(code), "--job-dir", str(jobs), cwd=tmp_path)
    refused(proc, f"distcomp submit: {str(code / 'pipe')!r} in the code folder is a FIFO (named pipe), not a regular "
                  "file: a code folder holds files and folders; remove it, or move it out of the code folder")
    assert not jobs.exists()


def test_a_sqlite_store_that_is_a_folder_is_refused_before_the_job_folder_exists(slurm_cluster: Path,
                                                                                  tmp_path: Path) -> None:
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    (tmp_path / "adir").mkdir()
    uri = f"sqlite:///{tmp_path}/adir"
    proc = subprocess.run([sys.executable, "-m", "distcomp", "submit", "--target", "slurm", str(TORCH),
                           "--job-dir", str(jobs)], capture_output=True, text=True, cwd=tmp_path,
                          env={**os.environ, "MLFLOW_TRACKING_URI": uri}, timeout=300)
    refused(proc, f"distcomp submit: MLflow tracking: MLFLOW_TRACKING_URI={uri!r}: {tmp_path}/adir is a folder; "
                  "name a database file in a folder you can write, e.g. sqlite:///mlflow.db, or pass --no-tracking")
    assert list(jobs.iterdir()) == [] and list((tmp_path / "adir").iterdir()) == []


@pytest.mark.slow
def test_a_controller_out_of_reach_is_not_called_a_refusal(slurm_cluster: Path, tmp_path: Path) -> None:
    """sbatch --test-only that cannot reach slurmctld: exit 1 (try again later), not 2; nothing made."""
    conf = (slurm_cluster / "slurm.conf").read_text()
    dead = tmp_path / "slurm.conf"
    dead.write_text("\n".join("SlurmctldPort=1" if line.startswith("SlurmctldPort=") else line
                              for line in conf.splitlines()) + "\n")
    jobs = tmp_path / "jobs"
    proc = subprocess.run([sys.executable, "-m", "distcomp", "submit", "--target", "slurm", str(TORCH),
                           "--job-dir", str(jobs)], capture_output=True, text=True, cwd=tmp_path,
                          env={**os.environ, "SLURM_CONF": str(dead)}, timeout=300)
    assert (proc.returncode, proc.stdout) == (1, ""), proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stderr.startswith("distcomp submit: cannot reach Slurm to submit the job: ")
    assert "Unable to contact slurm controller" in proc.stderr
    assert not jobs.exists()


FIX = ("set SLURM_CONF to the cluster's slurm.conf (to try it here: dev/slurm/cluster.sh start prints the export "
       "SLURM_CONF=... line), or run distcomp where Slurm is configured (a login node of the cluster)")


@pytest.mark.parametrize("command, tool", [("status", "scontrol"), ("cancel", "scontrol")])  # cancel asks first
def test_no_slurm_configuration_is_one_line_that_says_what_to_do(tmp_path: Path, command: str, tool: str) -> None:
    """No cluster needed: Slurm's commands without a configuration. Not their own fatal lines (nor
    a minute of their retries on a SLURM_CONF that is no file): distcomp's, exit 2."""
    env = {k: v for k, v in os.environ.items() if k != "SLURM_CONF"}
    missing = tmp_path / "nowhere" / "slurm.conf"
    for extra, why in (({}, "SLURM_CONF is not set, and this machine has no Slurm configuration of its own "
                            f"({tool}: fatal: Could not establish a configuration source)"),
                       ({"SLURM_CONF": str(missing)}, f"SLURM_CONF is {missing}, which is no file")):
        proc = subprocess.run([sys.executable, "-m", "distcomp", command, "slurm:12345"], capture_output=True,
                              text=True, cwd=tmp_path, env={**env, **extra}, timeout=300)
        refused(proc, f"distcomp {command}: {tool} finds no Slurm cluster: {why}; {FIX}")
    assert list(tmp_path.iterdir()) == []


def test_no_slurm_commands_on_path_is_said(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"  # a PATH with python alone: no scontrol
    bin_dir.mkdir()
    (bin_dir / "python").symlink_to(sys.executable)
    proc = subprocess.run([sys.executable, "-m", "distcomp", "status", "slurm:12345"], capture_output=True, text=True,
                          cwd=tmp_path, env={**os.environ, "PATH": str(bin_dir)}, timeout=300)
    refused(proc, "distcomp status: scontrol is not on PATH: the slurm target needs Slurm's commands (a login node "
                  "of the cluster; to try it here: dev/slurm/cluster.sh start, then export SLURM_CONF=...)")
