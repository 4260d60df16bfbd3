"""The backend config and the job record the entry point becomes (no process is started here)."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from distcomp.core.jobrecord import KEY, VERSION
from distcomp.targets.mlflow import MlflowTargetError
from distcomp.targets.mlflow._config import MLFLOW_KEYS, check_entry_command, entry_record, parse_config


def test_mlflows_own_keys_are_the_ones_mlflow_injects() -> None:
    from mlflow.projects import utils

    assert MLFLOW_KEYS == {utils.PROJECT_ENV_MANAGER, utils.PROJECT_SYNCHRONOUS, utils.PROJECT_DOCKER_ARGS,
                           utils.PROJECT_STORAGE_DIR, utils.PROJECT_BUILD_IMAGE, utils.PROJECT_DOCKER_AUTH,
                           utils.MLFLOW_LOCAL_BACKEND_RUN_ID_CONFIG}


def test_known_keys_become_the_job_records_options(tmp_path: Path) -> None:
    config = {"nproc_per_node": 2, "nodes": 3, "timeout": 1.5, "max_restarts": 0, "run_dir": "runs/x",
              "ENV_MANAGER": "local", "SYNCHRONOUS": False, "DOCKER_ARGS": {}, "STORAGE_DIR": "/tmp/s",
              "build_image": False, "docker_auth": None}
    settings = parse_config(config, tmp_path)
    assert settings.options == {"nproc_per_node": 2, "nodes": 3, "timeout": 1.5, "max_restarts": 0,
                                "run_dir": str(tmp_path / "runs/x")}
    assert settings.synchronous is False and settings.storage_dir == "/tmp/s"
    assert parse_config(None, tmp_path).options == {} and parse_config(None, tmp_path).synchronous is True


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


def project_record(folder: Path, **extra: object) -> None:
    (folder / "distcomp-job.json").write_text(json.dumps({
        KEY: VERSION, "action": "run", "spec": "component.yaml", "options": {"nodes": 1},
        "params": {"tag": "value", "n": "if-set"}, **extra}))


def test_the_filled_command_becomes_a_job_record_through_no_shell(tmp_path: Path) -> None:
    value = "a b; $(rm -rf x) 'q'"
    project_record(tmp_path)
    command = f"python -m distcomp.worker distcomp-job.json tag={shlex.quote(value)} n=''"
    record = entry_record(command, parse_config({"nproc_per_node": 2, "nodes": 2}, tmp_path), str(tmp_path))
    assert (record.action, record.spec) == ("run", str(tmp_path / "component.yaml"))
    assert dict(record.inputs) == {"tag": value}  # n: if-set and empty, so not given
    assert dict(record.options) == {"nodes": 2, "nproc_per_node": 2}  # the config over the project's
    assert record.version == 1  # what the worker it starts reads: no params left to give


def test_a_distcomp_run_command_is_refused_with_what_to_do(tmp_path: Path) -> None:
    """``distcomp run SPEC ...``, what compile wrote before projects carried a record, is no
    longer read (issue 35): the one entry point is the worker on the project's record."""
    command = "distcomp run component.yaml --nodes 1 --input tag='a b' --input-if-set n= --input-if-set m=2"
    with pytest.raises(MlflowTargetError, match=r"the entry point's command is .*distcomp run component.yaml.*: "
                                                r"the distcomp backend runs entry points whose command is `python -m "
                                                r"distcomp.worker RECORD NAME=VALUE \.\.\.`; write such a project with "
                                                r"`distcomp compile --target mlflow SPEC --out DIR`"):
        entry_record(command, parse_config({"nproc_per_node": 2}, tmp_path), str(tmp_path))


def test_a_project_record_of_a_newer_format_is_refused_with_what_to_do(tmp_path: Path) -> None:
    from distcomp.core.jobrecord import RecordError

    project_record(tmp_path, **{KEY: VERSION + 1, "distcomp": "9.1.0"})
    with pytest.raises(RecordError, match=rf"format {VERSION + 1}, written by distcomp 9.1.0, is newer than this "
                                          rf"distcomp .* reads \(format {VERSION} and older\): upgrade distcomp"):
        entry_record("python -m distcomp.worker distcomp-job.json tag=x", parse_config({}, tmp_path), str(tmp_path))


@pytest.mark.parametrize("template", ["python train.py", "bash -c 'distcomp run x'", "distcomp validate x", "'",
                                      "python -m distcomp run x", "distcomp run component.yaml --input a={a}"])
def test_only_distcomp_entry_points_are_taken(template: str) -> None:
    with pytest.raises(MlflowTargetError, match="distcomp compile --target mlflow"):
        check_entry_command(template)
    check_entry_command("python -m distcomp.worker distcomp-job.json a={a}")


@pytest.mark.slow
def test_a_run_here_loads_no_spec_loader_and_no_plugin_manager(tmp_path: Path) -> None:
    """What ``mlflow run -b distcomp`` pays beside MLflow's local backend (issue 38): the backend,
    its config of a run here and the job record, without the spec package or the installed
    targets (~70 ms); the worker loads the spec. A key only another target takes still finds them."""
    project_record(tmp_path)
    code = ("import sys, pathlib; import distcomp.targets.mlflow as m; m.DistcompBackend; "
            "from distcomp.targets.mlflow._config import entry_record, parse_config; "
            "d = pathlib.Path(sys.argv[1]); "
            "s = parse_config({'nproc_per_node': 2, 'run_dir': 'r', 'ENV_MANAGER': 'local', 'SYNCHRONOUS': False}, d); "
            "entry_record('python -m distcomp.worker distcomp-job.json tag=x', s, str(d)); "
            "print(*[n for n in ('distcomp.spec', 'distcomp.core.plugins') if n in sys.modules], 'then', end=' '); "
            "e = None\n"
            "try: parse_config({'address': 'x'}, d)\n"
            "except Exception as exc: e = exc\n"
            "print('distcomp.core.plugins' in sys.modules, e)")
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == ("then True backend config 'address' is an option of the ray target: "
                                   "add \"target\": \"ray\"")
