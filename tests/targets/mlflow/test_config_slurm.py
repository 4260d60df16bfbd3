"""The backend config's "target": "slurm": its keys, and the `distcomp submit` argv it makes."""

from __future__ import annotations

from pathlib import Path

import pytest

from distcomp.targets.mlflow._config import entry_argv, parse_config
from distcomp.targets.mlflow._errors import MlflowTargetError


def test_slurm_config_becomes_submit_flags(tmp_path: Path) -> None:
    settings = parse_config({"target": "slurm", "nodes": 2, "partition": "debug", "time": 5, "job_dir": "jobs",
                             "sbatch": ["--qos=high"], "SYNCHRONOUS": False}, tmp_path)
    assert settings.target == "slurm"
    command = "distcomp run spec.yaml --nodes 1 --input lr=0.1 --input-if-set seed= --input-if-set=tag=x"
    argv = entry_argv(command, settings, python="PY")
    assert argv == ["PY", "-m", "distcomp", "submit", "--target", "slurm", "spec.yaml", "--nodes", "1",
                    "--input", "lr=0.1", "--input", "tag=x", "--nodes", "2", "--partition", "debug", "--time", "5",
                    "--job-dir", str(tmp_path / "jobs"), "--sbatch=--qos=high"]
    # without a target, the same command runs here as before
    assert entry_argv(command, parse_config({}, tmp_path), python="PY")[3] == "run"


@pytest.mark.parametrize(("config", "message"), [
    ({"target": "kubeflow"}, "backend config target: expected one of 'local', 'slurm', got 'kubeflow'"),
    ({"time": 5}, "backend config 'time' is an option of the slurm target"),
    ({"target": "slurm", "max_restarts": 1}, "'max_restarts' does not apply to target slurm"),
    ({"target": "slurm", "time": 0}, "backend config time: expected an integer >= 1 (minutes), got 0"),
    ({"target": "slurm", "sbatch": "--qos=high"}, "backend config sbatch: expected a list of sbatch options"),
    ({"target": "slurm", "partiton": "x"}, "unknown backend config key 'partiton'"),
])
def test_bad_slurm_config_is_refused(config: dict, message: str, tmp_path: Path) -> None:  # type: ignore[type-arg]
    with pytest.raises(MlflowTargetError, match=None) as info:
        parse_config(config, tmp_path)
    assert message in str(info.value)
