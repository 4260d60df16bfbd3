"""A job's secrets on a real Slurm cluster: a secret input (multi-line, with quotes and shell
characters) and a secret variable of the spec reach the ranks unchanged, and appear in clear in
none of what distcomp shows or writes: the console of ``distcomp submit``, ``status --json``,
``logs``, outcome.json, the rank logs and Slurm's output, the MLflow store (tags, params, the
attached logs), job.sbatch (mode 600, naming the secrets it reads from secrets.sh)."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import JOBS

SPEC = JOBS / "secret" / "component.yaml"
SECRET = "line-one S3cr'et $HOME `x`\nline-two \"q\" end"
CLEAR = ("S3cr", "line-two", "tok-Env-S3cret")  # pieces of the input's lines and of the spec's API_TOKEN


def _distcomp(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "distcomp", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300, env=dict(os.environ))


def _clear_in(text: str | bytes) -> list[str]:
    data = text.encode() if isinstance(text, str) else text
    return [piece for piece in CLEAR if piece.encode() in data]


@pytest.mark.slow
def test_a_failing_job_shows_and_keeps_no_secret_in_clear(slurm_cluster: Path, tmp_path: Path) -> None:
    from mlflow import MlflowClient

    job_dir = tmp_path / "jobs"
    sha = hashlib.sha256(SECRET.encode()).hexdigest()
    sub = _distcomp("submit", "--target", "slurm", str(SPEC), "--nodes", "2", "--input", f"db_password={SECRET}",
                    "--input", f"pw_sha={sha}", "--job-dir", str(job_dir), cwd=tmp_path)
    console = sub.stdout + sub.stderr
    assert sub.returncode == 1, console
    assert _clear_in(console) == [], console
    job = sub.stdout.splitlines()[0]
    assert "rank1 (node n2) exited with code 3" in console, console
    assert "argv ['--pw', '***', '--pw-eq=***', '--pw-sha'" in console, console  # masked, not dropped
    assert "token ***" in console, console

    (folder,) = [p for p in job_dir.iterdir() if p.name.startswith("slurm-test-secret-")]
    # the secrets reached rank 0 unchanged through the script (it checked them, and ended well)
    assert (folder / "logs" / "rank0.log").read_text() == "rank 0: the secrets arrived whole\n"
    assert json.loads((folder / "exits" / "rank0.json").read_text())["exit_code"] == 0
    script = folder / "job.sbatch"
    text = script.read_text()
    assert stat.S_IMODE(script.stat().st_mode) == 0o600 and _clear_in(text) == [], text
    # the record names each secret by its index in secrets.sh, which the node agents read
    record = json.loads((folder / "node.json").read_text())
    (pw,) = record["command"][3]
    (token,) = record["env"]["API_TOKEN"]
    assert record["secrets"] == "secrets.sh" and record["command"][2] == "--pw", record["command"]
    assert isinstance(pw, int) and isinstance(token, int) and pw != token
    assert record["command"][4] == ["--pw-eq=", pw]
    assert not (folder / "secrets.sh").exists()  # the job ended: its secrets went with it (test_secrets_cleanup)
    assert stat.S_IMODE((folder / "logs").stat().st_mode) == 0o700
    # every file distcomp or the job wrote, the MLflow store (tags, params, artifacts) included;
    # secrets.sh is where the secrets live (mode 600), the spec and its code are the user's own
    own = {folder / "secrets.sh", folder / "component.yaml"}
    files = [p for p in tmp_path.rglob("*") if p.is_file() and p not in own and folder / "code" not in p.parents]
    assert sum(p.name in ("mlflow.db", "rank1.log") for p in files) >= 3  # the store, the log, its artifact
    leaks = {str(p.relative_to(tmp_path)): _clear_in(p.read_bytes()) for p in files}
    assert {k: v for k, v in leaks.items() if v} == {}
    rank1 = (folder / "logs" / "rank1.log").read_text()
    assert rank1.splitlines()[1:] == ["password:", "***", "***", "token ***"], rank1
    outcome = json.loads((folder / "outcome.json").read_text())
    assert outcome["state"] == "failed" and "    password:\n    ***\n    ***\n    token ***" in outcome["root_cause"]

    mlflow = outcome["tracking"]
    run = MlflowClient(mlflow["tracking_uri"]).get_run(mlflow["run_id"])
    assert run.data.params["db_password"] == "***" and run.data.params["pw_sha"] == sha
    told = run.data.tags.get("distcomp.failure") or ""  # the root cause, as the outcome's
    assert "rank1 (node n2) exited with code 3" in told and "token ***" in told, run.data.tags
    assert told == outcome["root_cause"] and run.data.tags["distcomp.message"].startswith("Slurm: FAILED")
    assert [k for k, v in {**run.data.tags, **run.data.params}.items() if _clear_in(v)] == []

    # another process, as a user's later `distcomp status|logs` (the masker comes from secrets.sh)
    status = _distcomp("status", job, "--json", cwd=tmp_path)
    assert status.returncode == 0 and _clear_in(status.stdout) == [], status.stdout
    logs = _distcomp("logs", job, cwd=tmp_path)
    assert logs.returncode == 0 and "[rank1] token ***" in logs.stdout and _clear_in(logs.stdout) == [], logs.stdout
