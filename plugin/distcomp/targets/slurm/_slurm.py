"""Slurm's own commands (sbatch, scontrol, scancel), found as Slurm's tools find their cluster
(``SLURM_CONF``, else the system's config). Accounting may be off: nothing here uses sacct."""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from typing import Sequence

from ...errors import JobError, UsageError
from ...records import JobState

# Slurm's job states as distcomp's (squeue/scontrol words); anything else still runs
_STATES = {
    "PENDING": JobState.PENDING, "CONFIGURING": JobState.PENDING, "REQUEUED": JobState.PENDING,
    "REQUEUE_HOLD": JobState.PENDING, "REQUEUE_FED": JobState.PENDING, "RESV_DEL_HOLD": JobState.PENDING,
    "COMPLETED": JobState.SUCCEEDED, "FAILED": JobState.FAILED, "NODE_FAIL": JobState.FAILED,
    "BOOT_FAIL": JobState.FAILED, "OUT_OF_MEMORY": JobState.FAILED, "PREEMPTED": JobState.CANCELLED,
    "CANCELLED": JobState.CANCELLED, "TIMEOUT": JobState.TIMED_OUT, "DEADLINE": JobState.TIMED_OUT,
}


@dataclass(frozen=True)
class SlurmJob:
    """One job as ``scontrol show job`` tells it."""

    job_id: str
    slurm_state: str  # COMPLETED, FAILED, ...
    reason: str
    exit_code: str  # "CODE:SIGNAL"
    fields: dict[str, str]

    @property
    def state(self) -> JobState:
        if self.slurm_state == "COMPLETING":  # its steps are ending: not over until they are
            return JobState.RUNNING
        return _STATES.get(self.slurm_state, JobState.RUNNING)


# what Slurm's commands say when they find no cluster configuration (no SLURM_CONF, no
# /etc/slurm/slurm.conf, no configless DNS record): their own fatal words, not the user's job's
_NO_CONFIG = ("Could not establish a configuration source", "Unable to process configuration file")
_CONFIG_FIX = ("set SLURM_CONF to the cluster's slurm.conf (to try it here: dev/slurm/cluster.sh start prints the "
               "export SLURM_CONF=... line), or run distcomp where Slurm is configured (a login node of the cluster)")


def _no_config(tool: str, said: str = "") -> UsageError:
    conf = os.environ.get("SLURM_CONF", "")
    if conf and not os.path.isfile(conf):  # Slurm itself retries such a file for a minute
        where = f"SLURM_CONF is {conf}, which is no file"
    elif conf:
        where = f"it cannot use SLURM_CONF={conf}"
    else:
        where = "SLURM_CONF is not set, and " + ("this machine has no Slurm configuration of its own"
                                                 if "configuration source" in said else
                                                 "this machine's own Slurm configuration cannot be used")
    last = next((line.strip() for line in reversed(said.splitlines()) if line.strip()), "")
    return UsageError(f"{tool} finds no Slurm cluster: {where}" + (f" ({last})" if last else "") + f"; {_CONFIG_FIX}")


def _ready(tool: str) -> None:
    """The tool is there and has a configuration to read; else a UsageError saying what to do."""
    if shutil.which(tool) is None:
        raise UsageError(f"{tool} is not on PATH: the slurm target needs Slurm's commands (a login node of "
                         "the cluster; to try it here: dev/slurm/cluster.sh start, then export SLURM_CONF=...)")
    conf = os.environ.get("SLURM_CONF", "")
    if conf and not os.path.isfile(conf):
        raise _no_config(tool)


def run(argv: Sequence[str], what: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    _ready(argv[0])
    proc = subprocess.run(list(argv), capture_output=True, text=True, timeout=60)
    if proc.returncode != 0 and any(words in proc.stderr for words in _NO_CONFIG):
        raise _no_config(argv[0], proc.stderr)
    if check and proc.returncode != 0:
        text = (proc.stderr or proc.stdout).strip()
        raise JobError(f"{what} failed ({' '.join(argv[:2])} exited with {proc.returncode}): {text}")
    return proc


def submit(script_path: str) -> str:
    out = run(["sbatch", "--parsable", script_path], "submitting the job").stdout.strip()
    job_id = out.split(";")[0]  # "ID" or "ID;CLUSTER"
    if not job_id.isdigit():
        raise JobError(f"sbatch gave no job id (it printed {out!r})")
    return job_id


_UNREACHABLE = ("Unable to contact slurm controller", "Socket timed out", "Connection refused")


def test(script_text: str) -> None:
    """Ask sbatch whether it would take the job (``--test-only``: nothing is queued); a refusal
    (an unknown partition or account, more memory than a node has) is the user's to fix."""
    _ready("sbatch")
    proc = subprocess.run(["sbatch", "--test-only"], input=script_text, capture_output=True, text=True, timeout=60)
    if proc.returncode != 0 and any(words in proc.stderr for words in _NO_CONFIG):
        raise _no_config("sbatch", proc.stderr)
    if proc.returncode != 0:
        text = "; ".join(line.strip() for line in (proc.stderr or proc.stdout).splitlines() if line.strip())
        text = text or f"sbatch --test-only exited with {proc.returncode}"
        if any(down in text for down in _UNREACHABLE):  # not the user's mistake: try again later
            raise JobError(f"cannot reach Slurm to submit the job: {text}")
        raise UsageError(f"Slurm refused the job: {text}")


def show(job_id: str) -> SlurmJob | None:
    """The job, or None once Slurm has forgotten it (MinJobAge after its end) or never had it."""
    proc = run(["scontrol", "show", "job", "-o", job_id], "asking Slurm for the job", check=False)
    if proc.returncode != 0:
        if "Invalid job id" in proc.stderr:
            return None
        raise JobError(f"scontrol show job {job_id} failed: {(proc.stderr or proc.stdout).strip()}")
    fields = parse_fields(proc.stdout)
    return SlurmJob(job_id, fields.get("JobState", "UNKNOWN"), fields.get("Reason", ""),
                    fields.get("ExitCode", ""), fields)


def parse_fields(line: str) -> dict[str, str]:
    """``Key=Value`` words of one ``scontrol -o`` line (a value may hold spaces: Command=, ...)."""
    out: dict[str, str] = {}
    key = ""
    for word in line.strip().split(" "):
        name, eq, value = word.partition("=")
        if eq and name and name.replace("/", "").replace(":", "").isalnum():
            key = name
            out[key] = value
        elif key:
            out[key] += " " + word
    return out


def cancel(job_id: str) -> None:
    run(["scancel", job_id], "cancelling the job")


_CLUSTERS: dict[str, str] = {}  # SLURM_CONF -> the ClusterName the controller told, once per process


def cluster_name() -> str:
    """The cluster's ``ClusterName`` (its slurm.conf, else ``scontrol show config`` for a
    configless one): a job id is unique only within one cluster, so distcomp's index of jobs
    is keyed by it; "" where neither says."""
    conf = os.environ.get("SLURM_CONF", "")
    try:
        with open(conf or "/etc/slurm/slurm.conf", encoding="utf-8", errors="replace") as f:
            for line in f:
                key, eq, value = line.split("#")[0].partition("=")
                if eq and key.strip().lower() == "clustername" and value.strip():
                    return value.strip()
    except OSError:
        pass
    if conf not in _CLUSTERS:
        try:
            proc = run(["scontrol", "show", "config"], "asking Slurm for its configuration", check=False)
        except (UsageError, JobError, OSError, subprocess.SubprocessError):
            return ""
        name = next((line.partition("=")[2].strip() for line in proc.stdout.splitlines()
                     if line.partition("=")[0].strip() == "ClusterName"), "")
        if not name:
            return ""  # asked again next time: the controller may answer then
        _CLUSTERS[conf] = name
    return _CLUSTERS[conf]
