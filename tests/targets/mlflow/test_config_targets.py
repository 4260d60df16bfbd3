"""The backend config's "target": any submitting target's own declared options are its keys
(ray's, and a third party's registered through the plugin manager), and the submit record."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

import pytest

from distcomp.errors import UsageError
from distcomp.core.hookspec import hookimpl
from distcomp.core.jobrecord import KEY, read_record, write_record
from distcomp.core.plugins import get_plugin_manager
from distcomp.core.target import TargetOption, TargetType
from distcomp.targets.mlflow._config import entry_record, parse_config
from distcomp.targets.mlflow._errors import MlflowTargetError

COMMAND = "python -m distcomp.worker distcomp-job.json sleep=0"


def project(folder: Path) -> None:
    (folder / "distcomp-job.json").write_text(json.dumps({
        KEY: 2, "action": "run", "spec": "spec.yaml", "options": {"nproc_per_node": 1},
        "params": {"sleep": "value"}}))


def test_ray_config_becomes_a_submit_record_ray_binds(tmp_path: Path) -> None:
    project(tmp_path)
    settings = parse_config({"target": "ray", "nodes": 2, "address": "http://127.0.0.1:8265", "cpus_per_node": 2,
                             "outputs": {"result": "/shared/out"}, "packages": ["numpy==2.1"],
                             "placement_timeout": 60}, tmp_path)
    record = read_record(write_record(tmp_path / "job.json", entry_record(COMMAND, settings, str(tmp_path))))
    assert (record.action, record.target, record.spec) == ("submit", "ray", str(tmp_path / "spec.yaml"))
    assert dict(record.inputs) == {"sleep": "0"}
    options = dict(record.options)
    assert options == {"nodes": 2, "nproc_per_node": 1, "address": "http://127.0.0.1:8265", "cpus_per_node": 2.0,
                       "outputs": {"result": "/shared/out"}, "packages": ["numpy==2.1"], "placement_timeout": 60.0}
    del options["nodes"], options["nproc_per_node"]  # distcomp.submit's own keywords; the rest are ray's
    bound = get_plugin_manager().target("ray").type.bind(options, submitting=True)
    assert dict(bound["outputs"]) == {"result": "/shared/out"} and bound["packages"] == ("numpy==2.1",)


@pytest.mark.parametrize(("config", "message"), [
    ({"address": "http://h:8265"}, "backend config 'address' is an option of the ray target: add \"target\": \"ray\""),
    ({"outputs": {"result": "/o"}}, "'outputs' is an option of the targets ray, slurm: add \"target\" with one"),
    ({"target": "ray", "adress": "x"}, "unknown backend config key 'adress' (did you mean 'address'?); with target "
                                       "ray the distcomp backend knows: nodes, nproc_per_node, outputs, address,"),
    ({"target": "ray", "partition": "debug"}, "'partition' does not apply to target ray: it is an option of target "
                                              "slurm"),
    ({"target": "ray", "timeout": 5}, "'timeout' does not apply to target ray: it is an option of a run on this "
                                      "machine (no \"target\"), target kubeflow or target slurm"),
    ({"target": "ray", "run_dir": "x"}, "'run_dir' does not apply to target ray"),
    ({"target": "ray", "inputs": {"sleep": 1}}, "'inputs' does not apply: the job's inputs are the entry point's "
                                                "parameters: give them as -P NAME=VALUE"),
    ({"target": "ray", "tracking": False}, "the job's MLflow run is the one `mlflow run` creates"),
    ({"target": "ray", "cpus_per_node": -1}, "backend config cpus_per_node: expected a number >= 0 (N), got -1"),
    ({"target": "ray", "packages": "numpy"}, "backend config packages: expected a list of text (REQUIREMENT)"),
    ({"target": "ray", "outputs": ["result=/o"]}, "backend config outputs: expected a mapping {\"NAME\": \"PATH\""),
    ({"target": "ray", "outputs": {"result": "out"}}, "'result': 'out' is a relative path; target 'ray' runs on "
                                                      "nodes that do not see this folder: give an absolute path"),
    ({"target": "ray", "nodes": 0}, "backend config nodes: expected an integer >= 1, got 0"),
])
def test_bad_ray_config_is_refused(config: dict[str, Any], message: str, tmp_path: Path) -> None:
    with pytest.raises(MlflowTargetError) as info:
        parse_config(config, tmp_path)
    assert message in str(info.value)


def test_every_problem_of_a_target_config_is_reported_at_once(tmp_path: Path) -> None:
    with pytest.raises(MlflowTargetError) as info:
        parse_config({"target": "ray", "adress": "x", "run_dir": "r", "cpus_per_node": "2", "partition": "p"}, tmp_path)
    assert len(str(info.value).splitlines()) == 4


def test_a_sharing_targets_relative_paths_are_read_where_mlflow_run_started(tmp_path: Path) -> None:
    settings = parse_config({"target": "slurm", "outputs": {"result": "out/r"}, "job_dir": "~/jobs"}, tmp_path)
    assert settings.options == {"outputs": {"result": str(tmp_path / "out/r")},
                                "job_dir": str(Path("~/jobs").expanduser())}


class Wide(TargetOption):
    """An option with its own reading, as a third party may declare one."""

    def check(self, value: Any, target: str) -> Any:
        if value not in ("narrow", "wide"):
            raise UsageError(f"target {target!r}: option 'shape' is narrow or wide, not {value!r}")
        return value


class ThirdParty:
    @hookimpl
    def distcomp_targets(self) -> Iterator[TargetType]:
        yield TargetType(name="acme", factory=object, submits=True, options=(
            TargetOption("pool", metavar="NAME"), TargetOption("slots", "int", minimum=2), Wide("shape")))


@pytest.fixture
def acme() -> Iterator[None]:
    plugin = ThirdParty()
    get_plugin_manager().register_plugin(plugin, name="acme-test", provider="acme")
    try:
        yield
    finally:
        get_plugin_manager().unregister(plugin)


@pytest.mark.usefixtures("acme")
def test_a_third_party_targets_options_are_its_keys(tmp_path: Path) -> None:
    project(tmp_path)
    settings = parse_config({"target": "acme", "pool": "gpu", "slots": 4, "shape": "wide", "nodes": 2}, tmp_path)
    record = entry_record(COMMAND, settings, str(tmp_path))
    assert (record.action, record.target) == ("submit", "acme")
    assert dict(record.options) == {"nproc_per_node": 1, "pool": "gpu", "slots": 4, "shape": "wide", "nodes": 2}
    with pytest.raises(MlflowTargetError) as info:
        parse_config({"target": "acme", "slots": 1, "shape": "round", "pols": "x"}, tmp_path)
    lines = str(info.value).splitlines()
    assert "backend config slots: expected an integer >= 2, got 1" in lines
    assert "backend config shape: target 'acme': option 'shape' is narrow or wide, not 'round'" in lines
    assert any(line.startswith("unknown backend config key 'pols' (did you mean 'pool'?)") for line in lines)
    with pytest.raises(MlflowTargetError, match="'pool' is an option of the acme target: add \"target\": \"acme\""):
        parse_config({"pool": "gpu"}, tmp_path)
