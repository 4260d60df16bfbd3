"""The backend config and the argv the entry point becomes (no process is started here)."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest

from distcomp.targets.mlflow import MlflowTargetError
from distcomp.targets.mlflow._config import MLFLOW_KEYS, check_entry_command, entry_argv, parse_config


def test_mlflows_own_keys_are_the_ones_mlflow_injects() -> None:
    from mlflow.projects import utils

    assert MLFLOW_KEYS == {utils.PROJECT_ENV_MANAGER, utils.PROJECT_SYNCHRONOUS, utils.PROJECT_DOCKER_ARGS,
                           utils.PROJECT_STORAGE_DIR, utils.PROJECT_BUILD_IMAGE, utils.PROJECT_DOCKER_AUTH,
                           utils.MLFLOW_LOCAL_BACKEND_RUN_ID_CONFIG}


def test_known_keys_become_distcomp_run_flags(tmp_path: Path) -> None:
    config = {"nproc_per_node": 2, "nodes": 3, "timeout": 1.5, "max_restarts": 0, "run_dir": "runs/x",
              "ENV_MANAGER": "local", "SYNCHRONOUS": False, "DOCKER_ARGS": {}, "STORAGE_DIR": "/tmp/s",
              "build_image": False, "docker_auth": None}
    settings = parse_config(config, tmp_path)
    assert settings.flags == ("--nproc-per-node", "2", "--nodes", "3", "--timeout", "1.5", "--max-restarts", "0",
                              "--run-dir", str(tmp_path / "runs/x"))
    assert settings.synchronous is False and settings.storage_dir == "/tmp/s"
    assert parse_config(None, tmp_path).flags == () and parse_config(None, tmp_path).synchronous is True


@pytest.mark.parametrize("config, message", [
    ({"nprocs": 2}, "unknown backend config key 'nprocs'; the distcomp backend knows: nproc_per_node, nodes"),
    ({"nproc_per_node": 0}, "backend config nproc_per_node: expected an integer >= 1, got 0"),
    ({"nodes": "2"}, "backend config nodes: expected an integer >= 1, got '2'"),
    ({"nodes": True}, "backend config nodes: expected an integer >= 1, got True"),
    ({"max_restarts": -1}, "expected an integer >= 0"),
    ({"timeout": 0}, "backend config timeout: expected a number of seconds > 0"),
    ({"run_dir": ""}, "backend config run_dir: expected a folder path"),
    ({"experiment": "x"}, "mlflow run's --experiment-name"),
    ({"ENV_MANAGER": "conda"}, "--env-manager conda: distcomp runs the ranks in the current environment"),
    ({"DOCKER_ARGS": {"gpus": "all"}}, "docker options do not apply"),
])
def test_bad_config_is_refused_with_what_to_do(tmp_path: Path, config: dict, message: str) -> None:
    with pytest.raises(MlflowTargetError) as info:
        parse_config(config, tmp_path)
    assert message in str(info.value)


def test_every_problem_is_reported_at_once(tmp_path: Path) -> None:
    with pytest.raises(MlflowTargetError) as info:
        parse_config({"nproc_per_nodes": 2, "nodes": 0}, tmp_path)
    lines = str(info.value).splitlines()
    assert len(lines) == 2 and "did you mean 'nproc_per_node'?" in lines[0] and "nodes" in lines[1]


def test_the_filled_command_becomes_an_argv_through_no_shell(tmp_path: Path) -> None:
    value = "a b; $(rm -rf x) 'q'"
    command = f"distcomp run component.yaml --input tag={shlex.quote(value)} --input-if-set n=''"
    argv = entry_argv(command, parse_config({"nproc_per_node": 2}, tmp_path))
    assert argv == [sys.executable, "-m", "distcomp", "run", "component.yaml", "--input", f"tag={value}",
                    "--input-if-set", "n=", "--nproc-per-node", "2"]


@pytest.mark.parametrize("template", ["python train.py", "bash -c 'distcomp run x'", "distcomp validate x", "'"])
def test_only_distcomp_run_entry_points_are_taken(template: str) -> None:
    with pytest.raises(MlflowTargetError, match="distcomp compile --target mlflow"):
        check_entry_command(template)
    check_entry_command("distcomp run component.yaml --input a={a}")
