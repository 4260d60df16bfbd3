"""Slurm nodes that do not see the code folder: ``--code-store`` ships the code through a real
S3-compatible store (moto on 127.0.0.1, every request's signature checked) and every node fetches
it with the core's stdlib fetcher into a folder of its own before its node agent starts.

The job's code folder is removed right after submit, and the job folder holds no copy: the job
still runs across both nodes of the real Slurm cluster, from the node-local folder, and logs to
one MLflow run. The store's credentials are in clear in neither the script nor the record nor
the logs: only in the job folder's store.sh (mode 600)."""

from __future__ import annotations

import getpass
import json
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

import distcomp
from distcomp.errors import UsageError
from distcomp.records import JobState
from tests._s3server import S3Server

from .conftest import JOBS, record_of

STORE_JOB = JOBS / "store"


def test_compile_fetches_the_code_on_every_node_before_the_agents(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDCOMPILE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "compile-Secret-Key")
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", "http://127.0.0.1:9000")
    compiled = distcomp.compile(STORE_JOB / "component.yaml", "slurm", nodes=2, code_store="s3://ml-jobs/team",
                                job_dir=str(tmp_path / "jobs"))
    text = compiled.text or ""
    assert not (tmp_path / "jobs").exists()
    assert "uploads the code to s3://ml-jobs/team" in compiled.notes[0] and "store.sh (mode 600)" in compiled.notes[0]
    record = record_of(text)
    # the replicas run in the node-local folder the fetch step makes, not in the job folder
    # compiled for the job's folder JOB_DIR/{{job_name}}: the name is bound when it is submitted
    assert record["cwd"] == f"/tmp/distcomp-{getpass.getuser()}/{{{{job_name}}}}"
    fetch = text.index("fetch-into ml-jobs team/code/sha256-")
    assert text.index("srun --kill-on-bad-exit=1 --nodes=2 --ntasks=2 \\", fetch - 300) < fetch
    assert fetch < text.index("-m distcomp.agent") and record["cwd"] in text[fetch:fetch + 300]
    assert 'cd "$DISTCOMP_JOB_FOLDER"\n' in text
    assert any("rm -rf -- " in line and record["cwd"] in line for line in text.splitlines())  # the end's sweep
    assert "export AWS_ENDPOINT_URL_S3=http://127.0.0.1:9000" in text
    assert "compile-Secret-Key" not in text and "AKIDCOMPILE" not in text  # from store.sh, at run time
    script = tmp_path / "job.sbatch"
    script.write_text(text)
    assert subprocess.run(["bash", "-n", str(script)], capture_output=True).returncode == 0


def test_the_node_dir_holds_the_jobs_node_local_folder(tmp_path: Path) -> None:
    nodes = tmp_path / "node local"  # a space: one quoted word wherever the script names it
    compiled = distcomp.compile(STORE_JOB / "component.yaml", "slurm", nodes=2, code_store="s3://ml-jobs/team",
                                node_dir=str(nodes), job_dir=str(tmp_path / "jobs"))
    text = compiled.text or ""
    assert record_of(text)["cwd"] == f"{nodes}/{{{{job_name}}}}"
    assert f"fetches it into {nodes}/{{{{job_name}}}}" in compiled.notes[0] and "/tmp/distcomp-" not in text
    assert any("rm -rf -- " in line and str(nodes) in line for line in text.splitlines())


@pytest.mark.parametrize(("options", "message"), [
    ({"node_dir": "/scratch/me"}, "give --code-store too"),
    ({"code_store": "s3://ml-jobs/team", "node_dir": "relative/dir"}, "absolute"),
])
def test_a_node_dir_needs_the_code_store_and_an_absolute_path(options: dict[str, str], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        distcomp.compile(STORE_JOB / "component.yaml", "slurm", **options)


def test_a_bad_code_store_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="is not an object store location"):
        distcomp.compile(STORE_JOB / "component.yaml", "slurm", code_store="/shared/bucket")


@pytest.mark.slow
def test_a_job_whose_code_is_gone_runs_from_the_store_on_both_nodes(
        slurm_cluster: Path, s3_server: S3Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from mlflow import MlflowClient

    src = tmp_path / "src"
    shutil.copytree(STORE_JOB, src)
    for name, value in s3_server.env().items():
        monkeypatch.setenv(name, value)
    job_dir = tmp_path / "jobs"
    prefix = f"slurm-{tmp_path.name}"
    nodes = tmp_path / "nodes"  # the node-local folders: this test's own, not the machine's /tmp
    job = distcomp.submit(src / "component.yaml", "slurm", nodes=2, job_dir=str(job_dir),
                          code_store=f"s3://{s3_server.bucket}/{prefix}", node_dir=str(nodes))
    shutil.rmtree(src)  # the code is gone from this machine: only the store has it now
    outcome = job.wait()
    folder = Path(outcome.details["folder"])
    assert outcome.state is JobState.SUCCEEDED, outcome.root_cause + outcome.message
    assert not (folder / "code").exists() and (folder / "component.yaml").is_file()
    (key,) = [o["Key"] for o in s3_server.boto3().list_objects_v2(Bucket=s3_server.bucket,
                                                                  Prefix=f"{prefix}/")["Contents"]]
    assert key.startswith(f"{prefix}/code/sha256-")
    ranks = [json.loads((Path(outcome.outputs["result"]) / f"rank{r}.json").read_text()) for r in range(2)]
    assert [r["node"] for r in ranks] == ["n1", "n2"] and {r["all_reduce"] for r in ranks} == {3.0}
    record = json.loads((folder / "node.json").read_text())
    local = record["cwd"]
    assert {r["cwd"] for r in ranks} == {local} and local.startswith(f"{nodes}/")
    assert {r["greeting"] for r in ranks} == {"fetched whole"}  # the code's subfolder came too
    assert not Path(local).exists()  # removed on every node when the job ended
    slurm_out = (folder / f"slurm-{job.id}.out").read_text()
    assert slurm_out.count(f"files into {local}") + slurm_out.count(f"{local}: already fetched") == 2, slurm_out
    # the store's credentials: in store.sh only (mode 600), nowhere else in the job folder
    creds = folder / "store.sh"
    assert stat.S_IMODE(creds.stat().st_mode) == 0o600 and s3_server.secret_key in creds.read_text()
    others = [p for p in folder.rglob("*") if p.is_file() and p != creds]
    assert {p.name for p in others} >= {"job.sbatch", "node.json", "rank0.log", f"slurm-{job.id}.out"}
    assert [p for p in others if s3_server.secret_key.encode() in p.read_bytes()] == []
    # one MLflow run: created before sbatch, handed to both ranks, ended with the job's state
    assert outcome.tracking is not None and {r["run_id"] for r in ranks} == {outcome.tracking.run_id}
    run = MlflowClient(f"sqlite:///{job_dir}/mlflow.db").get_run(outcome.tracking.run_id)
    assert run.info.status == "FINISHED" and run.data.metrics["all_reduce"] == 3.0


@pytest.mark.slow
def test_a_store_that_refuses_the_upload_leaves_no_job(slurm_cluster: Path, s3_server: S3Server, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A wrong key: the upload fails at submit with what to set, before sbatch; no job folder stays."""
    for name, value in s3_server.env(AWS_SECRET_ACCESS_KEY="not-the-key").items():
        monkeypatch.setenv(name, value)
    job_dir = tmp_path / "jobs"
    with pytest.raises(UsageError, match="403 Forbidden; set AWS_ACCESS_KEY_ID and "
                                                         "AWS_SECRET_ACCESS_KEY"):
        distcomp.submit(STORE_JOB / "component.yaml", "slurm", job_dir=str(job_dir),
                        code_store=f"s3://{s3_server.bucket}/refused")
    assert [p.name for p in job_dir.iterdir() if not p.name.startswith("mlflow.db")] == []  # the store only
