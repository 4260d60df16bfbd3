"""A Slurm job id names one job only within one cluster, and a cluster set up again counts from
1 again (issue 33): distcomp keys its indexes (the job dir's ``.ids``, the core's records) by
the cluster's ``ClusterName`` and the id, and checks a record it finds against the job Slurm
knows by that id before using it. The other clusters' jobs are forged here as an earlier
distcomp left them: a job folder with its record, a rank's log and an outcome, and the index
entries that name it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import distcomp
from distcomp.records import JobOutcome, JobState
from distcomp.targets.slurm import _slurm

from .._jobs import clean_env
from .conftest import JOBS

TORCH = JOBS / "torch" / "component.yaml"
UNKNOWN = "99999"  # an id the test cluster never reaches


def _forge(folder: Path, job_id: str, cluster: str | None, said: str) -> Path:
    """Another job's folder that had id ``job_id`` (on ``cluster``; None: as distcomp wrote it
    before it named clusters): its record, rank 0's log and its outcome, a failure."""
    (folder / "logs").mkdir(parents=True)
    (folder / "logs" / "rank0.log").write_text(said + "\n")
    record = {"slurm_job_id": job_id, "folder": str(folder), "outputs": {}, "submitted": 1.0}
    if cluster is not None:
        record["cluster"] = cluster
    (folder / "job.json").write_text(json.dumps(record))
    outcome = JobOutcome(f"slurm:{job_id}", JobState.FAILED, 1, root_cause=said, message=said)
    (folder / "outcome.json").write_text(json.dumps(outcome.to_json()))
    return folder


def _index(job_dir: Path, job_id: str, folder: Path, cluster: str | None) -> None:
    """The job dir's index entry of ``job_id``: ``.ids/CLUSTER/ID``, or ``.ids/ID`` (cluster None)."""
    path = job_dir / ".ids" / cluster / job_id if cluster else job_dir / ".ids" / job_id
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"{folder}\n")


def _distcomp(jobs: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``distcomp ARGS`` from another shell, whose default job dir is ``jobs``."""
    return subprocess.run([sys.executable, "-m", "distcomp", *args], env=clean_env(DISTCOMP_SLURM_DIR=str(jobs)),
                          capture_output=True, text=True, timeout=120)


def test_the_cluster_name_is_read_from_slurm_conf(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    conf = tmp_path / "slurm.conf"
    conf.write_text("# a cluster\nSlurmctldHost=head\nclustername = alpha-2  # the lab's\nPartitionName=debug\n")
    monkeypatch.setenv("SLURM_CONF", str(conf))
    assert _slurm.cluster_name() == "alpha-2"


@pytest.mark.slow
def test_status_and_logs_of_an_id_never_use_another_clusters_job(slurm_cluster: Path, job_dir: Path,
                                                                  tmp_path: Path) -> None:
    """Job N of this cluster ran; the default job dir holds job N of another cluster (its bare
    entry, as distcomp wrote it before, and its entry under that cluster's name), and then job N
    of an earlier cluster of the same name: `distcomp status|logs slurm:N` show this cluster's
    job N every time, never the other's outcome or log."""
    job = distcomp.submit(TORCH, "slurm", nodes=2, job_dir=str(job_dir))
    outcome = job.wait()
    assert outcome.state is JobState.SUCCEEDED, outcome.root_cause
    jobs = tmp_path / "jobs"  # the default job dir of the shell that asks
    other = _forge(tmp_path / "other-cluster", job.id, "other", "OTHER CLUSTER'S JOB")
    _index(jobs, job.id, other, None)
    _index(jobs, job.id, other, "other")
    # the core's record of that other job, under the bare id, as distcomp keyed it before
    from distcomp.core.submission import _index as record_index, jobs_dir

    forged = jobs_dir() / "forged-other-cluster-job"
    forged.mkdir(parents=True)
    (forged / "job.json").write_text(json.dumps({"version": 1, "job": f"slurm:{job.id}", "name": forged.name,
                                                 "needles": ["all_reduce"], "run_id": "f" * 32, "tracking_uri": "",
                                                 "experiment_id": "", "started_ms": 0, "ended": None}))
    record_index(f"slurm:{job.id}").write_text(forged.name + "\n")

    def shows_this_clusters_job() -> None:
        status = _distcomp(jobs, "status", f"slurm:{job.id}", "--json")
        assert status.returncode == 0, status.stderr
        said = json.loads(status.stdout)
        assert said["state"] == "succeeded" and said["details"]["folder"] == outcome.details["folder"], said
        logs = _distcomp(jobs, "logs", f"slurm:{job.id}")
        assert logs.returncode == 0, logs.stderr
        assert "[rank0] rank 0 on n1: all_reduce=" in logs.stdout and "CLUSTER'S JOB" not in logs.stdout, logs.stdout

    shows_this_clusters_job()
    assert json.loads((forged / "job.json").read_text())["ended"] is None  # never taken for this job's record
    # a cluster of the same name set up again: its job N is in the index under that name
    earlier = _forge(tmp_path / "earlier-cluster", job.id, "distcomp", "EARLIER CLUSTER'S JOB")
    _index(jobs, job.id, earlier, "distcomp")
    shows_this_clusters_job()


@pytest.mark.slow
def test_an_id_only_another_cluster_ran_is_no_job_here(slurm_cluster: Path, tmp_path: Path) -> None:
    """Slurm here never had job N; the index names another cluster's job N: status, logs and
    cancel say, in one line, that this cluster has no such distcomp job, and touch nothing."""
    jobs = tmp_path / "jobs"
    other = _forge(tmp_path / "other-cluster", UNKNOWN, "other", "OTHER CLUSTER'S JOB")
    _index(jobs, UNKNOWN, other, None)
    _index(jobs, UNKNOWN, other, "other")
    before = sorted(p.name for p in other.rglob("*"))
    for command in ("status", "logs", "cancel"):
        proc = _distcomp(jobs, command, f"slurm:{UNKNOWN}")
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == 2 and len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
        assert f"Slurm job {UNKNOWN} is not a distcomp job this machine knows on cluster 'distcomp'" in lines[0]
        assert "OTHER" not in proc.stdout + proc.stderr
    assert sorted(p.name for p in other.rglob("*")) == before
