"""The three ways a rank writes an MLflow run, each against a real store: a SQLite database
written directly, a real ``mlflow server`` through its REST API, and MLflow's own client (a
SQLite URI with a query string, which only MLflow handles). The test plays the launcher: it
creates runs with MlflowClient and gives rank scripts the environment `distcomp run` gives."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from mlflow import MlflowClient

LAUNCHER_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "NODE_RANK", "OMPI_", "PMI_",
                 "MPI_LOCAL", "TF_CONFIG", "PET_", "MASTER_", "AZ_BATCH", "MLFLOW_", "DISTCOMP_")
KINDS = ("sqlite", "server", "client")


class Store:
    """One kind of store: the URI the ranks get, a client to read it back, where its database
    and the runs' artifacts are on disk."""

    def __init__(self, kind: str, root: Path, server_uri: str = "", server_home: Path | None = None) -> None:
        self.kind = kind
        if kind == "server":
            assert server_home is not None
            self.uri = server_uri
            self.db = server_home / "mlflow.db"
            self.client = MlflowClient(server_uri)
            self.experiment_id = self.client.create_experiment(f"distcomp-logging-{root.name}")
            self.artifacts = server_home / "artifacts" / self.experiment_id  # the server's proxied store
        else:
            self.db = root / "mlflow.db"
            plain = f"sqlite:///{self.db}"  # sqlite:////abs/path, as the launcher gives it
            self.uri = plain + ("?timeout=30" if kind == "client" else "")
            self.client = MlflowClient(plain)
            self.artifacts = root / "artifacts"
            self.experiment_id = self.client.create_experiment("distcomp-logging", artifact_location=str(self.artifacts))

    def new_run(self) -> str:
        return self.client.create_run(self.experiment_id).info.run_id

    def env(self, run_id: str | None, rank: int | None = 0, **extra: str) -> dict[str, str]:
        """A rank's environment: torchrun's contract for 2 ranks, and the launcher's MLflow variables."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(LAUNCHER_VARS)}
        env["MLFLOW_DISABLE_TELEMETRY"] = "true"  # nothing leaves 127.0.0.1
        if rank is not None:
            env.update(RANK=str(rank), WORLD_SIZE="2", LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE="2",
                       MASTER_ADDR="127.0.0.1", MASTER_PORT="29500")
        if run_id is not None:
            env.update(MLFLOW_RUN_ID=run_id, DISTCOMP_MLFLOW_RUN_ID=run_id, MLFLOW_TRACKING_URI=self.uri,
                       MLFLOW_EXPERIMENT_ID=self.experiment_id)
        return {**env, **extra}

    def artifact_dir(self, run_id: str) -> Path:
        return self.artifacts / run_id / "artifacts"

    def history(self, run_id: str, key: str) -> list[tuple[int, float]]:
        return sorted((m.step, m.value) for m in self.client.get_metric_history(run_id, key))


def run_script(code: str, env: dict[str, str], *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args], check=False, env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=120)


@contextmanager
def started(code: str, env: dict[str, str], stdin: bool = False) -> Iterator[subprocess.Popen[str]]:
    """A rank script running, killed (by its pid) if the test ends before it does."""
    proc = subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], env=env, text=True,
                            stdin=subprocess.PIPE if stdin else None, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def last_json(proc: subprocess.CompletedProcess[str]) -> dict:
    assert proc.stdout.strip(), f"no output; rc {proc.returncode}, stderr:\n{proc.stderr[-3000:]}"
    return json.loads(proc.stdout.strip().splitlines()[-1])


def notices(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("distcomp.runtime:")]
