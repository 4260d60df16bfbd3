"""The component in KFP's own compiler: typed parameters and artifacts in the IR, the image,
and compile_component's file, which kfp loads back with the same interface."""

from pathlib import Path
from typing import Any

import yaml
from kfp import compiler, dsl
from kfp.components import load_component_from_file

from distcomp.kfp import DEFAULT_IMAGE, compile_component, load_component
from distcomp.spec import load
from tests.conftest import REPO
from tests.targets.kfp.conftest import ECHO

DDP = REPO / "examples" / "pytorch-ddp" / "component.yaml"


def ir_component(pipeline_yaml: Path, name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(component, executor) of ``name`` in a compiled pipeline."""
    ir = yaml.safe_load(pipeline_yaml.read_text())
    component = ir["components"][f"comp-{name}"]
    return component, ir["deploymentSpec"]["executors"][component["executorLabel"]]


def test_pipeline_compiles_with_typed_parameters_and_artifacts(tmp_path: Path) -> None:
    echo = load_component(ECHO)

    @dsl.component(base_image="python:3.11")
    def make_extra(extra: dsl.Output[dsl.Dataset]):
        pass

    @dsl.pipeline(name="typed")
    def pipeline(count: int = 4, ratio: float = 0.1, flag: bool = True):
        echo(name="n", count=count, ratio=ratio, flag=flag, mode="slow", extra=make_extra().outputs["extra"])

    compiler.Compiler().compile(pipeline, str(tmp_path / "p.yaml"))
    component, executor = ir_component(tmp_path / "p.yaml", "kfp-echo")
    params = component["inputDefinitions"]["parameters"]
    assert {n: p["parameterType"] for n, p in params.items()} == {
        "name": "STRING", "count": "NUMBER_INTEGER", "ratio": "NUMBER_DOUBLE", "flag": "BOOLEAN",
        "mode": "STRING", "fail_rank": "NUMBER_INTEGER", "opt": "NUMBER_DOUBLE"}
    assert "isOptional" not in params["name"]  # required, no default
    assert {n: p.get("defaultValue") for n, p in params.items() if n != "name"} == {
        "count": 3, "ratio": 0.5, "flag": False, "mode": "fast", "fail_rank": -1, "opt": None}
    assert params["opt"]["isOptional"] is True
    artifacts = component["inputDefinitions"]["artifacts"]
    assert artifacts == {"extra": {"artifactType": {"schemaTitle": "system.Dataset", "schemaVersion": "0.0.1"},
                                   "isOptional": True}}
    assert component["outputDefinitions"]["artifacts"]["out"]["artifactType"]["schemaTitle"] == "system.Model"
    assert executor["container"]["image"] == DEFAULT_IMAGE  # the spec names no image


def test_the_example_component_interface_and_image(tmp_path: Path) -> None:
    train = load_component(DDP)
    assert train.name == "pytorch-ddp-example"
    inputs = train.component_spec.inputs
    assert {n: (i.type, i.default, i.optional) for n, i in inputs.items()} == {
        "epochs": ("Integer", 5, True), "lr": ("Float", 0.05, True), "batch_size": ("Integer", 64, True),
        "samples": ("Integer", 4096, True), "seed": ("Integer", 0, True),
        "data": ("system.Artifact@0.0.1", None, True), "init_from": ("system.Artifact@0.0.1", None, True)}
    assert inputs["epochs"].description == "Passes over the data."
    assert list(train.component_spec.outputs) == ["model"]
    assert train.component_spec.implementation.container.image == "python:3.11-slim"  # the spec's
    other = load_component(DDP, image="registry.example/distcomp-torch:0.1.0")
    assert other.component_spec.implementation.container.image == "registry.example/distcomp-torch:0.1.0"


def test_compile_component_writes_a_file_kfp_loads_with_the_same_interface(tmp_path: Path) -> None:
    for spec in (ECHO, DDP):
        path = compile_component(spec.parent, tmp_path / f"{spec.parent.name}.yaml")  # a folder works too
        loaded = load_component_from_file(str(path))
        made = load_component(spec)
        assert loaded.name == made.name
        assert loaded.component_spec.inputs == made.component_spec.inputs
        assert loaded.component_spec.outputs == made.component_spec.outputs
        image = made.component_spec.implementation.container.image
        assert loaded.component_spec.implementation.container.image == image


def test_compile_is_reproducible(tmp_path: Path) -> None:
    first = compile_component(DDP, tmp_path / "a.yaml").read_bytes()
    assert compile_component(DDP, tmp_path / "b.yaml").read_bytes() == first
    assert compile_component(DDP, tmp_path / "c.yaml", nproc_per_node=4).read_bytes() != first


def test_packages_to_install_reach_the_step(tmp_path: Path) -> None:
    path = compile_component(ECHO, tmp_path / "e.yaml", packages_to_install=["distcomp==0.1.0"])
    (executor,) = yaml.safe_load(path.read_text())["deploymentSpec"]["executors"].values()
    assert "'distcomp==0.1.0'" in executor["container"]["command"][2]


def test_any_description_and_optional_kinds(tmp_path: Path) -> None:
    (tmp_path / "run.py").write_text("")
    (tmp_path / "component.yaml").write_text('''\
name: 9-odd.name
type: command
description: 'Quotes """ and a backslash \\\\ survive.'
inputs:
  steps: {type: integer, optional: true, description: 'it''s optional'}
  table: {type: mltable, default: ./table}
outputs:
  out: {type: uri_folder}
command: python run.py $[[--steps ${{inputs.steps}}]] --table ${{inputs.table}} --out ${{outputs.out}}
distribution: {type: mpi, process_count_per_instance: 2}
''')
    component = load_component(tmp_path)
    assert component.name == "component-9-odd-name"
    spec = component.component_spec
    written = load(tmp_path / "component.yaml").description
    assert '"""' in written and "\\" in written
    assert spec.description.startswith(written + "\n")
    assert (spec.inputs["steps"].type, spec.inputs["steps"].optional, spec.inputs["steps"].default) == (
        "Integer", True, None)
    assert spec.inputs["steps"].description == "it's optional"
    # a port default is a path distcomp resolves in the step: for KFP the artifact is optional
    assert (spec.inputs["table"].type, spec.inputs["table"].optional) == ("system.Dataset@0.0.1", True)
    assert spec.outputs["out"].type == "system.Artifact@0.0.1"


def test_run_options_reach_the_step() -> None:
    component = load_component(ECHO, nproc_per_node=4, timeout=30, max_restarts=1)
    source = max(component.component_spec.implementation.container.command, key=len)
    # the job record's template, with its format: what the step's `python -m distcomp.worker` reads;
    # max_restarts is the task's retry (tests/targets/kfp/test_retry.py), not the step's own restarts
    assert "{'distcomp_job': 1, 'options': {'nproc_per_node': 4, 'timeout': 30.0}}," in source
    assert "'--nproc-per-node'" not in source and "'distcomp', 'run'" not in source  # no CLI flag in the step
    plain = max(load_component(ECHO, nproc_per_node=2).component_spec.implementation.container.command, key=len)
    assert "        {'distcomp_job': 1, 'options': {}},\n    )" in plain  # the spec's own 2 processes
