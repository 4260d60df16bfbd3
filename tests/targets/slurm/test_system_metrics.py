"""Every node's system metrics in the job's one MLflow run, on the real two-node Slurm cluster
(issue 37): each node's agent starts a monitor for its node (``system/n1/...``, ``system/n2/...``,
named by SLURMD_NODENAME) while its ranks run, and stops it when they end."""

from __future__ import annotations

from pathlib import Path

import pytest

import distcomp
from distcomp.records import JobState

from .conftest import JOBS, record_of

TORCH = JOBS / "torch" / "component.yaml"
MPI = JOBS / "mpi" / "component.yaml"


def test_the_record_asks_each_agent_to_sample_at_the_plan_s_interval(tmp_path: Path) -> None:
    """Pure: on by default (every 10 s), the interval from the flag, none with it off."""
    def entry(**options: object) -> object:
        text = distcomp.compile(TORCH, "slurm", nodes=2, job_dir=str(tmp_path), **options).text or ""
        return record_of(text).get("system_metrics")

    assert entry() == {"interval": 10.0, "shared_exits": True}  # exits/ on the shared job folder
    assert entry(system_metrics_interval=2.5) == {"interval": 2.5, "shared_exits": True}
    assert entry(system_metrics=False) is None


@pytest.mark.slow
def test_two_nodes_give_one_run_with_both_nodes_series(job_dir: Path) -> None:
    job = distcomp.submit(TORCH, "slurm", nodes=2, inputs={"sleep": 12}, system_metrics_interval=1.0,
                          job_dir=str(job_dir))
    outcome = job.wait()
    assert outcome.state is JobState.SUCCEEDED, outcome.root_cause + outcome.message
    assert outcome.tracking is not None
    from mlflow import MlflowClient

    client = MlflowClient(f"sqlite:///{job_dir}/mlflow.db")
    run_id = outcome.tracking.run_id
    metrics = client.get_run(run_id).data.metrics
    folder = Path(outcome.details["folder"])
    for node in ("n1", "n2"):
        history = client.get_metric_history(run_id, f"system/{node}/cpu_utilization_percentage")
        log = folder / "monitors" / f"{node}.log"
        assert len(history) >= 2, (node, sorted(metrics), log.read_text() if log.exists() else "no monitor log")
        assert f"system/{node}/system_memory_usage_megabytes" in metrics
        assert "got SIGTERM; stopped" in log.read_text()  # its agent stopped it as the ranks ended
    assert {k.split("/")[1] for k in metrics if k.startswith("system/")} == {"n1", "n2"}
    assert metrics["all_reduce"] == 3.0  # rank 0's own metrics, unchanged
    assert sorted(p.name for p in (folder / "logs").iterdir()) == ["rank0.log", "rank1.log"]


@pytest.mark.slow
def test_an_mpi_job_s_second_node_is_sampled_too(job_dir: Path) -> None:
    """mpirun on node 0 starts node 1's ranks itself: node 1's agent, with no replica of its own,
    samples its node until the job's replicas have ended (exits/ on the shared job folder)."""
    outcome = distcomp.submit(MPI, "slurm", nodes=2, system_metrics_interval=1.0, job_dir=str(job_dir)).wait()
    assert outcome.state is JobState.SUCCEEDED, outcome.root_cause + outcome.message
    assert outcome.tracking is not None
    from mlflow import MlflowClient

    metrics = MlflowClient(f"sqlite:///{job_dir}/mlflow.db").get_run(outcome.tracking.run_id).data.metrics
    assert {k.split("/")[1] for k in metrics if k.startswith("system/")} == {"n1", "n2"}, sorted(metrics)
    folder = Path(outcome.details["folder"])
    assert "got SIGTERM; stopped" in (folder / "monitors" / "n2.log").read_text()


@pytest.mark.slow
def test_an_untracked_job_samples_nothing(job_dir: Path) -> None:
    outcome = distcomp.submit(TORCH, "slurm", nodes=2, tracking=False, job_dir=str(job_dir)).wait()
    assert outcome.state is JobState.SUCCEEDED, outcome.root_cause + outcome.message
    folder = Path(outcome.details["folder"])
    assert not (folder / "monitors").exists()
    assert "system metrics" not in (folder / f"slurm-{outcome.job_id.removeprefix('slurm:')}.out").read_text()
