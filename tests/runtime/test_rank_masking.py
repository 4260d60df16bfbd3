"""What a rank logs itself is masked by the one rule: the values of its secret-named environment
variables (the job's ``--env MY_SECRET=...``, or one inherited from the submitting shell) are
``***`` in every param and tag value and in a logged text or dict, through ``distcomp.runtime``
and through MLflow's own API alike. A real ``distcomp run`` (one process) into a real SQLite
store; what is not a secret (a flag, the working folder) stays as it was."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from mlflow import MlflowClient

from ..targets._jobs import clean_env

SECRET = "hunter2-Rank-7c1e"
INHERITED = "ghp_inherit-55aa"
SPEC = """\
$schema: https://azuremlschemas.azureedge.net/latest/commandJob.schema.json
command: python job.py
code: .
environment:
  image: python:3.11-slim
"""
JOB = """\
import os

import mlflow
from distcomp import runtime

secret = os.environ["MY_SECRET"]
runtime.log_param("x", secret)
runtime.log_params({"inherited": "token=" + os.environ["CLOUD_TOKEN"], "cwd": os.getcwd(), "amp": "true"})
runtime.flush()
with mlflow.start_run():
    mlflow.log_param("y", secret)
    mlflow.log_params({"z": "is " + secret, "plain": "1"})
    mlflow.set_tag("t", "key " + secret)
    mlflow.set_tags({"u": secret})
    mlflow.log_text("the secret is " + secret, "notes.txt")
    mlflow.log_dict({"k": [secret, 3]}, "d.json")
"""


@pytest.mark.slow
def test_what_a_rank_logs_holds_no_secret_of_its_environment(sqlite_uri: str, tmp_path: Path) -> None:  # noqa: F811
    code = tmp_path / "code"
    code.mkdir()
    (code / "job.yml").write_text(SPEC)
    (code / "job.py").write_text(JOB)
    env = clean_env(MLFLOW_TRACKING_URI=sqlite_uri, CLOUD_TOKEN=INHERITED, TOKENIZERS_PARALLELISM="true")
    proc = subprocess.run([sys.executable, "-m", "distcomp", "run", "job.yml", "--quiet", "--run-dir", str(tmp_path / "run"),
                           "--env", f"MY_SECRET={SECRET}", "--experiment", "rank-masking"],
                          cwd=code, capture_output=True, text=True, env=env, timeout=180)
    assert proc.returncode == 0, proc.stderr
    client = MlflowClient(sqlite_uri)
    (run,) = client.search_runs([client.get_experiment_by_name("rank-masking").experiment_id])
    params, tags = run.data.params, run.data.tags
    assert {k: params[k] for k in ("x", "inherited", "y", "z")} == {
        "x": "***", "inherited": "token=***", "y": "***", "z": "is ***"}
    assert (tags["t"], tags["u"]) == ("key ***", "***")
    # not secrets: a flag (though TOKENIZERS_PARALLELISM=true is set), the working folder (PWD)
    assert (params["amp"], params["plain"]) == ("true", "1") and params["cwd"].endswith("code")
    folder = Path(client.download_artifacts(run.info.run_id, "", str(tmp_path / "got")))
    assert (folder / "notes.txt").read_text() == "the secret is ***"
    assert json.loads((folder / "d.json").read_text()) == {"k": ["***", 3]}
    stored = Path(sqlite_uri.removeprefix("sqlite:///")).read_bytes()
    assert SECRET.encode() not in stored and INHERITED.encode() not in stored


def test_a_ranks_secrets_are_its_secret_named_variables_less_folders_and_flags() -> None:
    from distcomp.base.redact import env_secrets

    environ = {"MY_SECRET": SECRET, "API_KEY_ENABLED": "true", "NCCL_IB_PKEY": "1", "PWD": "/home/me/proj",
               "OLDPWD": "/home/me", "TOKENIZERS_PARALLELISM": "false", "SSH_AUTH_SOCK": "/tmp/ssh-x/agent.1",
               "EPOCHS": "3", "HF_TOKEN": INHERITED}
    assert env_secrets(environ) == [SECRET, INHERITED]
