"""The job handle owns the MLflow run, for every target: a third-party target written only
against the public contract (``distcomp.core.target``, ``distcomp.core.hookspec``, ``distcomp.records``,
``distcomp.records``), installed through a real entry point, runs its ranks as plain
processes on this machine and has no tracking code. Through ``distcomp submit`` it gets one
MLflow run per job in a real store (a SQLite file, a real ``mlflow server`` on 127.0.0.1),
rank 0's metrics in it, its secrets masked everywhere, a failed rank's root cause in the run's
``distcomp.failure`` tag and in the outcome, and the run ended when another process learns
the end (``distcomp status``), once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from .._dists import install
from ..targets._jobs import clean_env

SECRET = "hunter2-Zq9x"
TIMEOUT = 120

PLUGIN = '''
import os
import signal
import socket
import subprocess
import uuid
from pathlib import Path

from distcomp.core.hookspec import hookimpl
from distcomp.records import JobOutcome, JobState
from distcomp.records import COMMAND, bind, placeholders
from distcomp.core.target import Compiled, TargetOption, TargetType

# a rank's wrapper: its output to its log, then its exit code, written whole
WRAP = 'log=$1; code=$2; shift 2; "$@" > "$log" 2>&1; echo $? > "$code.tmp"; mv "$code.tmp" "$code"'


def _folder(job_id):
    return Path(os.environ["PROCJOB_HOME"]) / job_id


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return str(s.getsockname()[1])


class ProcJob:
    """Every replica of the plan as a plain process here, each in its own session."""

    def compile(self, spec, options):
        return Compiled(kind="process list", text=spec.name + "\\n")

    def submit(self, spec, options, notify, job):
        if options["refuse"]:
            raise RuntimeError(f"the cluster refused {job.values.get('db_password')}")
        job_id = uuid.uuid4().hex[:12]
        folder = _folder(job_id)
        folder.mkdir(parents=True)
        command = spec.render(job.values, {})
        topology = job.plan.topology
        known = {"job_dir": str(folder), "job_id": job_id, "restart": "0", "max_restarts": "0",
                 **{f"port:{p}": _free_port() for p in topology.ports},
                 **{f"host:{n}": "127.0.0.1" for n in range(topology.nodes)},
                 **{f"node:{n}": "localhost" for n in range(topology.nodes)}}
        for r in topology.replicas:
            argv = [a for item in r.argv for a in (command if item == COMMAND else [bind(item, known)])]
            env = {**os.environ, **spec.environment_variables, **{k: bind(v, known) for k, v in r.env.items()},
                   **job.env}
            proc = subprocess.Popen(["/bin/sh", "-c", WRAP, "sh", str(folder / f"rank{r.rank}.log"),
                                     str(folder / f"rank{r.rank}.exit"), *argv],
                                    cwd=spec.code, env=env, start_new_session=True, stdin=subprocess.DEVNULL)
            (folder / f"rank{r.rank}.pid").write_text(str(proc.pid))
        notify(f"procjob {job_id}: {len(topology.replicas)} process(es)")
        return job_id

    def status(self, job_id):
        folder = _folder(job_id)
        name = "procjob:" + job_id
        pids = sorted(folder.glob("rank*.pid"))
        if not pids:
            return JobOutcome(name, JobState.UNKNOWN, message="no such job")
        if (folder / "cancelled").exists():
            return JobOutcome(name, JobState.CANCELLED, exit_code=143)
        codes = {}
        for pid in pids:
            rank = pid.name[:-len(".pid")]
            if not (folder / f"{rank}.exit").exists():
                return JobOutcome(name, JobState.RUNNING)
            codes[rank] = int((folder / f"{rank}.exit").read_text())
        failed = [r for r, c in codes.items() if c != 0]
        if not failed:
            return JobOutcome(name, JobState.SUCCEEDED, exit_code=0)
        rank = failed[0]
        tail = (folder / f"{rank}.log").read_text().splitlines()[-5:]
        cause = f"{rank} exited with code {codes[rank]}\\n" + "\\n".join("    " + line for line in tail)
        return JobOutcome(name, JobState.FAILED, exit_code=1, root_cause=cause, message=f"{rank} failed")

    def logs(self, job_id, rank, follow):
        folder = _folder(job_id)
        for path in sorted(folder.glob("rank*.log")):
            if rank is None or path.name == f"rank{rank}.log":
                prefix = "" if rank is not None else f"[{path.stem}] "
                yield from (prefix + line for line in path.read_text().splitlines(keepends=True))

    def cancel(self, job_id):
        folder = _folder(job_id)
        (folder / "cancelled").write_text("")
        for pid in folder.glob("rank*.pid"):
            try:
                os.killpg(int(pid.read_text()), signal.SIGTERM)
            except ProcessLookupError:
                pass
        return self.status(job_id)


@hookimpl
def distcomp_targets():
    yield TargetType(name="procjob", factory=ProcJob, submits=True, job_ids="a job folder's name",
                     description="the ranks as plain processes here",
                     options=(TargetOption("inputs", "pairs", flag="--input", short="-i", metavar="NAME=VALUE"),
                              TargetOption("refuse", "bool", default=False, submit_only=True)))
'''

RANK = '''
import argparse
import sys

from distcomp import runtime

parser = argparse.ArgumentParser()
parser.add_argument("--db-password")
parser.add_argument("--fail-rank", type=int)
args = parser.parse_args()
rank = runtime.rank_info().rank
print(f"rank {rank} of {runtime.rank_info().world_size} logs in with {args.db_password}", flush=True)
for step in range(3):
    runtime.log_metric("loss", 1.0 / (step + 1 + rank), step=step)
runtime.finish()
if rank == args.fail_rank:
    print(f"boom: the database refused {args.db_password}", flush=True)
    sys.exit(3)
'''

SPEC = """\
name: procjob-demo
type: DistributedComponent
inputs:
  db_password: {type: String}
  fail_rank: {type: Integer, default: -1}
launcher:
  type: torch.distributed
  process_count_per_node: 2
  additional_arguments: python rank.py --db-password {inputs.db_password} --fail-rank {inputs.fail_rank}
"""


@pytest.fixture
def plugged(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """The spec of a two-rank job, and the environment in which ``procjob`` is installed."""
    install(tmp_path / "site", "procjob-dist", "procjob_plugin", PLUGIN, "[distcomp]\nprocjob = procjob_plugin\n")
    code = tmp_path / "code"
    code.mkdir()
    (code / "rank.py").write_text(RANK, encoding="utf-8")
    (code / "component.yaml").write_text(SPEC, encoding="utf-8")
    env = clean_env(PYTHONPATH=os.pathsep.join(filter(None, [str(tmp_path / "site"), os.environ.get("PYTHONPATH")])),
                    PROCJOB_HOME=str(tmp_path / "jobs"), XDG_STATE_HOME=str(tmp_path / "state"))
    env.pop("MLFLOW_RUN_ID", None)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])  # `python` for the ranks
    return code / "component.yaml", env


def distcomp(*args: Any, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "distcomp", *map(str, args)], capture_output=True, text=True,
                          timeout=TIMEOUT, env=env, cwd=cwd)


def runs_of(uri: str) -> list[Any]:
    from mlflow import MlflowClient

    client = MlflowClient(uri)
    return client.search_runs([e.experiment_id for e in client.search_experiments()])


def no_secret(uri: str, run: Any, tmp_path: Path) -> None:
    """The secret is in none of the run's params, tags or logs."""
    from mlflow import MlflowClient

    assert run.data.params["db_password"] == "***"
    assert not [k for k, v in {**run.data.params, **run.data.tags}.items() if SECRET in v]
    client = MlflowClient(uri)
    (tmp_path / "artifacts").mkdir()
    logs = client.download_artifacts(run.info.run_id, "logs/job.log", str(tmp_path / "artifacts"))
    text = Path(logs).read_text()
    assert "[rank0] rank 0 of 2 logs in with ***" in text and SECRET not in text


@pytest.mark.slow
@pytest.mark.parametrize("store", ["sqlite", "server"])
def test_a_plugin_target_gets_one_run_with_rank_0s_metrics_and_masked_secrets(
        plugged: tuple[Path, dict[str, str]], tmp_path: Path, store: str, request: pytest.FixtureRequest) -> None:
    spec, env = plugged
    uri = request.getfixturevalue("sqlite_uri" if store == "sqlite" else "mlflow_server")
    env["MLFLOW_TRACKING_URI"] = uri
    before = {r.info.run_id for r in runs_of(uri)}
    proc = distcomp("submit", "--target", "procjob", spec, "-i", f"db_password={SECRET}", "--experiment",
                    f"procjob-{store}-{tmp_path.name}", env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert SECRET not in proc.stdout + proc.stderr
    job = proc.stdout.strip()
    assert job.startswith("procjob:")
    (run,) = [r for r in runs_of(uri) if r.info.run_id not in before]  # one run for the job's two ranks
    assert run.info.status == "FINISHED"
    assert run.data.tags["distcomp.state"] == "succeeded" and run.data.tags["distcomp.job"] == job
    assert run.data.tags["distcomp.world_size"] == "2" and run.data.tags["distcomp.exit_code"] == "0"
    from mlflow import MlflowClient

    history = MlflowClient(uri).get_metric_history(run.info.run_id, "loss")
    assert [(m.step, m.value) for m in history] == [(0, 1.0), (1, 0.5), (2, 1.0 / 3)]  # rank 0's, not rank 1's
    no_secret(uri, run, tmp_path)
    shown = distcomp("status", job, "--json", env=env, cwd=tmp_path)
    assert shown.returncode == 0 and SECRET not in shown.stdout + shown.stderr
    assert json.loads(shown.stdout)["tracking"]["run_id"] == run.info.run_id
    logs = distcomp("logs", job, env=env, cwd=tmp_path)
    assert "[rank1] rank 1 of 2 logs in with ***" in logs.stdout and SECRET not in logs.stdout


@pytest.mark.slow
def test_a_failed_rank_is_the_runs_failure_tag_and_the_outcomes_root_cause(
        plugged: tuple[Path, dict[str, str]], tmp_path: Path, sqlite_uri: str) -> None:
    spec, env = plugged
    env["MLFLOW_TRACKING_URI"] = sqlite_uri
    status = tmp_path / "outcome.json"
    proc = distcomp("submit", "--target", "procjob", spec, "-i", f"db_password={SECRET}", "-i", "fail_rank=1",
                    "--status-file", status, env=env, cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    assert SECRET not in proc.stdout + proc.stderr
    assert "rank1 exited with code 3" in proc.stderr and "boom: the database refused ***" in proc.stderr
    outcome = json.loads(status.read_text())
    assert outcome["state"] == "failed" and outcome["root_cause"].startswith("rank1 exited with code 3\n")
    assert "boom: the database refused ***" in outcome["root_cause"] and SECRET not in status.read_text()
    (run,) = runs_of(sqlite_uri)
    assert run.info.status == "FAILED" and run.info.run_id == outcome["tracking"]["run_id"]
    assert run.data.tags["distcomp.failure"] == outcome["root_cause"]
    assert run.data.tags["distcomp.message"] == "rank1 failed"
    no_secret(sqlite_uri, run, tmp_path)


@pytest.mark.slow
def test_the_run_ends_when_another_process_learns_the_end(
        plugged: tuple[Path, dict[str, str]], tmp_path: Path, mlflow_server: str) -> None:
    spec, env = plugged
    env["MLFLOW_TRACKING_URI"] = mlflow_server
    experiment = f"detached-{tmp_path.name}"
    proc = distcomp("submit", "--target", "procjob", spec, "-i", f"db_password={SECRET}", "-i", "fail_rank=0",
                    "--detach", "--experiment", experiment, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    job = proc.stdout.strip()
    folder = tmp_path / "jobs" / job.partition(":")[2]
    deadline = time.monotonic() + TIMEOUT
    while len(list(folder.glob("rank*.exit"))) < 2:  # the ranks ended; nobody has asked yet
        assert time.monotonic() < deadline
        time.sleep(0.2)
    from mlflow import MlflowClient

    client = MlflowClient(mlflow_server)
    (run,) = client.search_runs([client.get_experiment_by_name(experiment).experiment_id])
    assert run.info.status == "RUNNING"  # the submitting process has exited; the run waits for the end
    shown = distcomp("status", job, env=env, cwd=tmp_path)  # another process, another shell
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith(f"{job}: failed: rank0 exited with code 3") and SECRET not in shown.stdout
    run = client.get_run(run.info.run_id)
    assert run.info.status == "FAILED" and "boom: the database refused ***" in run.data.tags["distcomp.failure"]
    again = distcomp("status", job, env=env, cwd=tmp_path)
    assert again.returncode == 0 and again.stdout == shown.stdout
    assert client.get_run(run.info.run_id).info.end_time == run.info.end_time  # ended once
    records = list((tmp_path / "state" / "distcomp" / "jobs").glob("*/job.json"))
    assert [json.loads(p.read_text())["ended"]["state"] for p in records] == ["failed"]
    assert records[0].stat().st_mode & 0o777 == 0o600  # it holds the masker's needles: its owner's only


def test_a_job_the_target_fails_to_submit_leaves_its_run_failed_with_the_masked_reason(
        plugged: tuple[Path, dict[str, str]], tmp_path: Path, sqlite_uri: str) -> None:
    spec, env = plugged
    env["MLFLOW_TRACKING_URI"] = sqlite_uri
    proc = distcomp("submit", "--target", "procjob", spec, "-i", f"db_password={SECRET}", "--refuse",
                    env=env, cwd=tmp_path)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert "the cluster refused ***" in proc.stderr and SECRET not in proc.stdout + proc.stderr
    (run,) = runs_of(sqlite_uri)
    assert run.info.status == "FAILED"
    assert run.data.tags["distcomp.failure"].startswith("not submitted: ")
    assert "the cluster refused ***" in run.data.tags["distcomp.failure"] and SECRET not in run.data.tags["distcomp.failure"]
    assert not list((tmp_path / "state" / "distcomp" / "jobs").glob("*/job.json"))  # no job, no record
