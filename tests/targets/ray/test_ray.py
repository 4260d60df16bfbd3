"""The ray target against a real two-node Ray cluster (dev/ray/cluster.sh): a torch all-reduce
with a rank on each node in one MLflow run, DeepSpeed's and TensorFlow's worlds across the nodes,
a failing rank as the root cause (and restarted with --max-restarts), detach, status, logs and
cancel leaving nothing running, and the refusals (no cluster, unknown job)."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from mlflow import MlflowClient

from .conftest import TORCH, distcomp, marked, one_line, ray_env
from tests._metrics import ranks_metrics


def _runs(tmp_path: Path) -> list[Any]:
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    return client.search_runs([e.experiment_id for e in client.search_experiments()])


def _submit(env: dict[str, str], out: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    return distcomp(env, "submit", str(TORCH), "--target", "ray", "--nodes", "2", "--output", f"result={out}", *flags,
                    cwd=out.parent)


@pytest.mark.slow
def test_a_torch_all_reduce_runs_on_both_nodes_in_one_mlflow_run(ray_cluster: str, tmp_path: Path) -> None:
    env = ray_env(ray_cluster, tmp_path)
    out = tmp_path / "out"
    proc = _submit(env, out)
    assert proc.returncode == 0, proc.stderr
    job = proc.stdout.strip()
    ranks = [json.loads((out / f"rank{r}.json").read_text()) for r in range(2)]
    assert [(r["rank"], r["world"], r["sum"]) for r in ranks] == [(0, 2, 3.0), (1, 2, 3.0)]
    assert sorted(r["node"] for r in ranks) == ["n1", "n2"]  # one rank on each Ray node
    (run,) = _runs(tmp_path)
    assert {r["run_id"] for r in ranks} == {run.info.run_id}
    assert run.info.status == "FINISHED" and ranks_metrics(run.data.metrics) == {"allreduce": 3.0}
    assert run.data.tags["distcomp.job"] == job and run.data.tags["distcomp.world_size"] == "2"
    logs = distcomp(env, "logs", job, "--rank", "1")
    assert logs.returncode == 0 and logs.stdout == f"rank 1 of 2 on {ranks[1]['node']}\n", logs.stdout + logs.stderr
    status = distcomp(env, "status", job, "--json")
    assert status.returncode == 0 and json.loads(status.stdout)["state"] == "succeeded", status.stdout + status.stderr


@pytest.mark.slow
def test_the_first_failing_rank_ends_the_job_and_is_its_root_cause(ray_cluster: str, tmp_path: Path) -> None:
    env = ray_env(ray_cluster, tmp_path)
    proc = _submit(env, tmp_path / "out", "-i", "fail_rank=1")
    said = proc.stdout + proc.stderr
    assert proc.returncode == 1, said
    job = proc.stdout.strip()
    assert "root cause:\n  rank1 (node 1, " in said and ") exited with code 5\n" in said, said
    assert "      rank 1 gives up on purpose\n" in said, said
    assert marked(job.removeprefix("ray:")) == []  # rank 0, blocked in its rendezvous, was stopped
    (run,) = _runs(tmp_path)
    assert run.info.status == "FAILED" and "rank1 (node 1, " in run.data.tags["distcomp.failure"]
    status = distcomp(env, "status", job, "--json")
    assert json.loads(status.stdout)["root_cause"].startswith("rank1 (node 1, "), status.stdout + status.stderr


@pytest.mark.slow
def test_max_restarts_starts_every_rank_again_after_a_failure(ray_cluster: str, tmp_path: Path) -> None:
    """rank 1 fails on the first attempt only: with --max-restarts 1 the job restarts on both nodes
    and succeeds, {{restart}}/{{max_restarts}} bound as the local target binds them; without, it fails."""
    env = ray_env(ray_cluster, tmp_path)
    out = tmp_path / "out"
    proc = _submit(env, out, "-i", "fail_rank=1", "-i", "recover_at=1", "--max-restarts", "1")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    job = proc.stdout.strip()
    ranks = [json.loads((out / f"rank{r}.json").read_text()) for r in range(2)]
    assert [(r["sum"], r["restart"], r["max_restarts"]) for r in ranks] == [(3.0, 1, 1), (3.0, 1, 1)]
    assert sorted(r["node"] for r in ranks) == ["n1", "n2"]
    log = distcomp(env, "logs", job).stdout
    assert "distcomp ray: restarting every rank (restart 1 of 1): rank1 (node 1, " in log, log
    # every rank starts again; rank 0's first attempt may be stopped before it prints (its torch
    # import is slower than rank 1's failure under load), so only the second attempt is counted
    again = log.partition("distcomp ray: restarting every rank")[2]
    assert "[rank0] rank 0 of 2 on" in again and "[rank1] rank 1 of 2 on" in again, log
    assert log.count("[rank1] rank 1 gives up on purpose") == 1, log
    status = json.loads(distcomp(env, "status", job, "--json").stdout)
    assert status["state"] == "succeeded" and status["details"]["restarts"] == 1, status
    (run,) = _runs(tmp_path)
    assert run.info.status == "FINISHED" and {r["run_id"] for r in ranks} == {run.info.run_id}
    # the same job without --max-restarts: the first failure is the end
    proc = _submit(env, tmp_path / "out0", "-i", "fail_rank=1", "-i", "recover_at=1")
    assert proc.returncode == 1 and "root cause:\n  rank1 (node 1, " in proc.stderr, proc.stderr
    assert "restarting every rank" not in distcomp(env, "logs", proc.stdout.strip()).stdout
    assert not (tmp_path / "out0" / "rank0.json").exists()


@pytest.mark.slow
def test_detach_status_logs_and_cancel_leave_nothing_running(ray_cluster: str, tmp_path: Path) -> None:
    env = ray_env(ray_cluster, tmp_path)
    proc = _submit(env, tmp_path / "out", "-i", "sleep=600", "--detach")
    assert proc.returncode == 0, proc.stderr
    job = proc.stdout.strip()
    mark = job.removeprefix("ray:")
    deadline = time.monotonic() + 120  # a bound on the wait for both ranks to say they run, not a timing assertion
    seen = ""
    while not ("[rank0] rank 0 of 2 on" in seen and "[rank1] rank 1 of 2 on" in seen) and time.monotonic() < deadline:
        time.sleep(0.5)
        seen = distcomp(env, "logs", job).stdout
    assert "[rank0] rank 0 of 2 on" in seen and "[rank1] rank 1 of 2 on" in seen, seen
    assert len(marked(mark)) == 8  # on each node: the guard, the node agent, the rank and its system-metrics monitor
    status = distcomp(env, "status", job, "--json")
    assert json.loads(status.stdout)["state"] == "running", status.stdout + status.stderr
    rank0 = distcomp(env, "logs", job, "--rank", "0")
    assert rank0.stdout.startswith("rank 0 of 2 on n"), rank0.stdout + rank0.stderr
    began = time.monotonic()
    cancel = distcomp(env, "cancel", job)
    took = time.monotonic() - began
    assert cancel.returncode == 0 and "cancelled" in cancel.stdout + cancel.stderr, cancel.stdout + cancel.stderr
    assert marked(mark) == []  # every agent and every rank, on both nodes
    # at once: SIGTERM to the driver, every node's agent stopped together, Ray's STOPPED within a
    # few tenths of a second of the driver's exit (2-3 s on a quiet machine; it was 26.7 s)
    assert took < 10, f"distcomp cancel took {took:.1f} s"
    status = distcomp(env, "status", job, "--json")
    assert json.loads(status.stdout)["state"] == "cancelled"
    (run,) = _runs(tmp_path)
    assert run.info.status == "KILLED"
    # --follow of an ended job prints its whole log and returns
    followed = distcomp(env, "logs", job, "--rank", "1", "--follow")
    assert followed.returncode == 0 and followed.stdout.startswith("rank 1 of 2 on"), followed.stdout


@pytest.mark.slow
def test_a_request_the_cluster_can_never_hold_fails_with_its_totals(ray_cluster: str, tmp_path: Path) -> None:
    env = ray_env(ray_cluster, tmp_path)
    proc = _submit(env, tmp_path / "out", "--cpus-per-node", "8")
    said = proc.stdout + proc.stderr
    assert proc.returncode == 1, said
    assert "the cluster can never hold this job: it needs 2 node(s) with {\"CPU\": 8.0} each" in said, said
    assert "it has 2 alive node(s): " in said and "CPU 1" in said, said


def test_no_cluster_at_the_address_is_one_line_and_makes_no_run(tmp_path: Path) -> None:
    out = tmp_path / "out"
    one_line(_submit(ray_env("http://127.0.0.1:9", tmp_path), out), "no Ray Jobs API at http://127.0.0.1:9")
    one_line(_submit(ray_env(None, tmp_path), out), "no Ray cluster given", "--address")
    one_line(_submit(ray_env(None, tmp_path), out, "--address", "ftp://x"), "http://HOST:PORT")
    assert not (tmp_path / "mlflow.db").exists() and not out.exists()


@pytest.mark.slow
def test_an_unknown_job_id_isone_line(ray_cluster: str, tmp_path: Path) -> None:
    env = ray_env(ray_cluster, tmp_path)
    for command in ("status", "logs", "cancel"):
        one_line(distcomp(env, command, "ray:no-such-job"), "no Ray job 'no-such-job' at")
    one_line(distcomp(env, "status", "ray:bad/id"), "is not a Ray job id")


@pytest.mark.slow
def test_a_secret_input_reaches_the_ranks_and_nothing_distcomp_shows(ray_cluster: str, tmp_path: Path) -> None:
    secret = "tok-9f8e7d6c5b4a"
    spec = TORCH.parents[1] / "secret" / "component.yaml"
    env = ray_env(ray_cluster, tmp_path)
    compiled = distcomp(env, "compile", str(spec), "--target", "ray", "--nodes", "2", "-i", f"api_token={secret}")
    assert compiled.returncode == 0 and secret not in compiled.stdout, compiled.stdout  # an index into secrets.sh
    proc = distcomp(env, "submit", str(spec), "--target", "ray", "--nodes", "2", "-i", f"api_token={secret}",
                    cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert secret not in proc.stdout + proc.stderr
    logs = distcomp(env, "logs", proc.stdout.strip())
    assert f"got token *** of {len(secret)} characters" in logs.stdout and secret not in logs.stdout, logs.stdout
    (run,) = _runs(tmp_path)
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    text = Path(client.download_artifacts(run.info.run_id, "logs/rank1.log", str(tmp_path))).read_text()
    assert text == f"rank 1 got token *** of {len(secret)} characters\n"
    assert secret not in json.dumps(run.data.params) + json.dumps(run.data.tags)


@pytest.mark.slow
def test_a_tensorflow_multi_worker_job_forms_its_world_across_the_nodes(ray_cluster: str, tmp_path: Path) -> None:
    env = ray_env(ray_cluster, tmp_path)
    out = tmp_path / "out"
    spec = TORCH.parents[1] / "tensorflow" / "component.yaml"
    proc = distcomp(env, "submit", str(spec), "--target", "ray", "--nodes", "2", "--output", f"result={out}",
                    cwd=tmp_path, timeout=600)
    assert proc.returncode == 0, proc.stderr
    tasks = [json.loads((out / f"worker-{i}.json").read_text()) for i in range(2)]
    assert [(t["rank"], t["world"], t["replicas"], t["all_reduce"]) for t in tasks] == [(0, 2, 2, 3.0), (1, 2, 2, 3.0)]
    assert sorted(t["node"] for t in tasks) == ["n1", "n2"]  # one worker on each Ray node
    workers = tasks[0]["cluster"]["worker"]
    assert tasks[1]["cluster"]["worker"] == workers and len(set(workers)) == 2  # each worker's node address, a port each


@pytest.mark.slow
def test_a_deepspeed_job_forms_its_world_across_the_nodes(ray_cluster: str, tmp_path: Path) -> None:
    env = ray_env(ray_cluster, tmp_path)
    out = tmp_path / "out"
    spec = TORCH.parents[1] / "deepspeed" / "component.yaml"
    proc = distcomp(env, "submit", str(spec), "--target", "ray", "--nodes", "2", "--output", f"result={out}",
                    cwd=tmp_path, timeout=600)
    assert proc.returncode == 0, proc.stderr
    ranks = [json.loads((out / f"rank{r}.json").read_text()) for r in range(2)]
    assert [(r["rank"], r["world"], r["all_reduce"]) for r in ranks] == [(0, 2, 3.0), (1, 2, 3.0)]
    assert sorted(r["node"] for r in ranks) == ["n1", "n2"]  # one rank on each Ray node
    assert ranks[0]["master"] == ranks[1]["master"]  # one rendezvous: node 0's address
