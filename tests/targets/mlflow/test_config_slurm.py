"""The backend config's "target": "slurm": its keys, and the submit record it makes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from distcomp.core.jobrecord import KEY, read_record, write_record
from distcomp.core.plugins import get_plugin_manager
from distcomp.targets.mlflow._config import entry_record, parse_config
from distcomp.targets.mlflow._errors import MlflowTargetError


def test_slurm_config_becomes_a_submit_record(tmp_path: Path) -> None:
    settings = parse_config({"target": "slurm", "nodes": 2, "partition": "debug", "time": 5, "job_dir": "jobs",
                             "sbatch": ["--qos=high"], "SYNCHRONOUS": False}, tmp_path)
    assert settings.target == "slurm"
    (tmp_path / "distcomp-job.json").write_text(json.dumps({
        KEY: 2, "action": "run", "spec": "spec.yaml", "options": {"nodes": 1, "nproc_per_node": 2},
        "params": {"lr": "value", "seed": "if-set", "tag": "if-set"}}))
    command = "python -m distcomp.worker distcomp-job.json lr=0.1 seed= tag=x"
    record = read_record(write_record(tmp_path / "job.json", entry_record(command, settings, str(tmp_path))))
    assert (record.action, record.target, record.spec) == ("submit", "slurm", str(tmp_path / "spec.yaml"))
    assert dict(record.inputs) == {"lr": "0.1", "tag": "x"}
    options = dict(record.options)
    assert options == {"nodes": 2, "nproc_per_node": 2, "partition": "debug", "time": 5,
                       "job_dir": str(tmp_path / "jobs"), "sbatch": ["--qos=high"]}
    del options["nodes"], options["nproc_per_node"]  # distcomp.submit's own keywords; the rest are slurm's
    bound = get_plugin_manager().target("slurm").type.bind(options, submitting=True)
    assert bound["sbatch"] == ("--qos=high",) and bound["time"] == 5
    # without a target, the same command runs here
    assert entry_record(command, parse_config({}, tmp_path), str(tmp_path)).action == "run"


@pytest.mark.parametrize(("config", "message"), [
    ({"target": "kfp"}, "backend config target: expected one of 'local', 'kubeflow', 'ray', 'slurm' (a target that "
                        "submits), got 'kfp'"),
    ({"target": "slurn"}, "got 'slurn' (did you mean 'slurm'?)"),
    ({"time": 5}, "backend config 'time' is an option of the slurm target"),
    ({"target": "slurm", "run_dir": "/x"}, "'run_dir' does not apply to target slurm"),
    ({"target": "slurm", "max_restarts": -1}, "backend config max_restarts: expected an integer >= 0"),
    ({"target": "slurm", "time": 0}, "backend config time: expected an integer >= 1 (MINUTES), got 0"),
    ({"target": "slurm", "sbatch": "--qos=high"}, "backend config sbatch: expected a list of text (OPTION), got '--qos=high'"),
    ({"target": "slurm", "partiton": "x"}, "unknown backend config key 'partiton' (did you mean 'partition'?)"),
])
def test_bad_slurm_config_is_refused(config: dict, message: str, tmp_path: Path) -> None:  # type: ignore[type-arg]
    with pytest.raises(MlflowTargetError, match=None) as info:
        parse_config(config, tmp_path)
    assert message in str(info.value)
