"""The Azure ML target, checked by azure-ai-ml itself: every file we write is loaded back with
``azure.ai.ml.load_component(path)`` and ``_validate()``d offline (there is no workspace here,
so nothing is submitted)."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from distcomp.core.plan import job_env
from distcomp import azureml
from distcomp.core.plugins import PluginManager, get_plugin_manager
from distcomp.spec import ComponentSpec, load, loads
from distcomp.spec._template import parse
from distcomp.targets.azureml import azure_name, compile_mapping
from distcomp.targets.azureml._component import component_mapping
from distcomp.core.plan import make_plan

REPO = Path(__file__).resolve().parents[3]
PEERS = REPO / "tests" / "reference" / "peer-specs"
PEER_SPECS = sorted(p for p in PEERS.glob("*.y*ml"))
# the shipped library, the example, and a test job of every built-in launcher
OWN_SPECS = (sorted(REPO.glob("components/*/component.yaml")) + sorted(REPO.glob("examples/*/component.yaml"))
             + sorted(REPO.glob("examples/recipes/*/component.yaml"))
             + sorted(REPO.glob("tests/launchers/jobs/*/component.yaml")))
IMAGE = "python:3.11-slim"
AZURE_DISTRIBUTION = {"torch.distributed": "PyTorchDistribution", "deepspeed": "PyTorchDistribution",
                      "mpi": "MpiDistribution", "tensorflow.distributed": "TensorFlowDistribution"}
logging.getLogger("azure.ai.ml").setLevel(logging.ERROR)
# azure-ai-ml (on marshmallow 3) warns about its own use of marshmallow APIs hundreds of times
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore:.*:UserWarning:marshmallow")


def azure_load(path: Path) -> Any:
    """azure-ai-ml's own loader and validator on the file, as a user of Azure ML would run them."""
    from azure.ai.ml import load_component

    component = load_component(source=str(path))
    result = component._validate()
    assert result.passed, result.error_messages
    return component


def as_dict(entity: Any) -> dict[str, Any]:
    return entity._to_dict() if hasattr(entity, "_to_dict") else dict(vars(entity))


def compile_to(spec: Path, out: Path, **options: Any) -> Any:
    if load(spec).environment is None:
        options.setdefault("image", IMAGE)
    azureml.compile_component(spec, out, **options)
    return azure_load(out)


def expected_input_type(spec: ComponentSpec, name: str) -> str:
    i = spec.inputs[name]
    if i.is_port:
        return i.type.lower() if i.type.lower().startswith(("uri_", "mltable", "mlflow", "custom", "triton")) \
            else ("uri_file" if i.holds == "file" else "uri_folder")
    return "string" if i.type == "enum" else i.type


def same_argv(spec: ComponentSpec, azure_command: str) -> None:
    """The command azure-ai-ml holds renders to the argv distcomp runs, with or without the
    optional inputs (so ``$[[ ]]`` blocks sit where the spec's optional blocks were)."""
    template, issues = parse(azure_command, "v2")
    assert not [i for i in issues if i.severity == "error"], issues
    refs = {(r.kind, r.name) for r, _ in spec.command.references()}
    assert {(r.kind, r.name) for r, _ in template.references()} == refs
    env = {"RANK": "3", "HOME": "/home/u", "TF_CONFIG": "{}"}
    for drop_optional in (False, True):
        def value(ref: Any) -> str | None:
            if ref.kind == "inputs" and drop_optional and spec.inputs[ref.name].optional:
                return None
            return f"<{ref.kind}.{ref.name} a b>"  # a value with spaces stays one argument in both
        assert template.render(value, env) == spec.command.render(value, env)


# -- every spec we ship and every spec written by others ------------------------------------------
@pytest.mark.parametrize("path", PEER_SPECS + OWN_SPECS, ids=lambda p: p.relative_to(p.parents[1]).as_posix())
def test_spec_compiles_to_a_component_azure_validates(path: Path, tmp_path: Path) -> None:
    spec = load(path)
    component = compile_to(path, tmp_path / "out" / "component.yml")
    assert type(component).__name__ == "CommandComponent"
    assert component.type == "command"
    assert component.name == azure_name(spec.name)
    d = spec.distribution
    assert type(component.distribution).__name__ == AZURE_DISTRIBUTION[d.launcher]
    if d.launcher == "tensorflow.distributed":
        assert component.distribution.worker_count == (d.worker_count or d.nodes * (d.processes_per_node or 1))
        assert component.distribution.parameter_server_count == d.parameter_server_count
    else:
        assert component.distribution.process_count_per_instance == (d.processes_per_node or 1)
    assert component.resources.instance_count == d.nodes
    assert set(component.inputs) == set(spec.inputs)
    for name, i in spec.inputs.items():
        assert component.inputs[name].type == expected_input_type(spec, name), name
        assert bool(component.inputs[name].optional) == i.optional
        if not i.is_port and i.default is not None:
            assert component.inputs[name].default == i.default
    assert set(component.outputs) == set(spec.outputs)
    same_argv(spec, component.command)
    if spec.code.is_dir():  # azure-ai-ml resolves code relative to the file: it must be the spec's folder
        assert (tmp_path / "out" / component.code).resolve() == spec.code.resolve()
    else:
        assert component.code is None
    # the spec's variables, and distcomp's rank defaults (MLFLOW_DISABLE_TELEMETRY) where it sets none
    assert dict(component.environment_variables or {}) == job_env(spec)


@pytest.mark.parametrize("path", [p for p in PEER_SPECS + OWN_SPECS if load(p).inputs], ids=lambda p: p.name)
def test_in_memory_component_matches_the_written_file(path: Path, tmp_path: Path) -> None:
    """distcomp.azureml.load_component gives what load_component(compiled file) gives."""
    image = None if load(path).environment else IMAGE
    ours = azureml.load_component(path, image=image)
    theirs = compile_to(path, tmp_path / "c.yml")
    assert ours.command == theirs.command
    assert as_dict(ours.distribution) == as_dict(theirs.distribution)
    assert {n: as_dict(i) for n, i in ours.inputs.items()} == {n: as_dict(i) for n, i in theirs.inputs.items()}
    if theirs.code:  # each relative to where its YAML is (or would be)
        assert (path.parent / ours.code).resolve() == (tmp_path / theirs.code).resolve()
    else:
        assert ours.code is None


@pytest.mark.parametrize("launcher,nodes,per_node", [("torch.distributed", 3, 4), ("mpi", 2, 3),
                                                     ("tensorflow.distributed", 2, 2), ("deepspeed", 4, 1)])
def test_node_layout_overrides_reach_the_distribution(launcher: str, nodes: int, per_node: int,
                                                      tmp_path: Path) -> None:
    folder = {"torch.distributed": "torch", "mpi": "mpi", "tensorflow.distributed": "tensorflow",
              "deepspeed": "deepspeed"}[launcher]
    component = compile_to(REPO / "tests/launchers/jobs" / folder / "component.yaml", tmp_path / "c.yml",
                           nodes=nodes, nproc_per_node=per_node)
    assert component.resources.instance_count == nodes
    assert type(component.distribution).__name__ == AZURE_DISTRIBUTION[launcher]
    if launcher == "tensorflow.distributed":
        assert (component.distribution.worker_count, component.distribution.parameter_server_count) == (4, 0)
    else:
        assert component.distribution.process_count_per_instance == per_node


# -- round trip: azure-ai-ml v2 -> distcomp -> azure-ai-ml v2 -----------------------------------
@pytest.mark.parametrize("path", [p for p in PEER_SPECS if "azureml-v2" in p.name], ids=lambda p: p.name)
def test_v2_spec_round_trips(path: Path, tmp_path: Path) -> None:
    original = yaml.safe_load(path.read_text(encoding="utf-8"))
    compile_to(path, tmp_path / "c.yml")
    back = yaml.safe_load((tmp_path / "c.yml").read_text(encoding="utf-8"))
    assert back["command"] == original["command"].strip()  # kept as written
    dist = dict(original["distribution"])
    if dist["type"].strip() == "tensorflow":
        dist.setdefault("parameter_server_count", 0)
    assert back["distribution"] == {k: v.strip() if isinstance(v, str) else v for k, v in dist.items()}
    assert back["resources"] == original["resources"]
    assert back["environment"] == original["environment"]
    for name, declared in (original.get("inputs") or {}).items():
        if isinstance(declared, dict):
            assert {k: v for k, v in back["inputs"][name].items()} == declared
        elif isinstance(declared, str) and declared.startswith("azureml:"):  # a job's data asset
            assert back["inputs"][name] == {"type": "uri_folder"}
        else:  # a job's literal value: a typed input with that default
            assert back["inputs"][name]["default"] == declared
            assert back["inputs"][name]["type"] == {bool: "boolean", int: "integer", float: "number",
                                                    str: "string"}[type(declared)]
    assert set(back.get("inputs", {})) == set(original.get("inputs") or {})


def test_v2_component_azure_loads_equals_ours(tmp_path: Path) -> None:
    """The peer component azure-ai-ml loads as it is: same distribution, resources and command."""
    path = PEERS / "azureml-v2-component-pytorch.yml"
    original = azure_load(path)
    ours = compile_to(path, tmp_path / "c.yml")
    assert as_dict(ours.distribution) == as_dict(original.distribution)
    assert as_dict(ours.resources) == as_dict(original.resources)
    assert (ours.command, ours.name, ours.version, ours.environment) == \
        (original.command, original.name, original.version, original.environment)


# -- the mapping, field by field -------------------------------------------------------------------
FULL_SPEC = """\
name: Full.Example-Component
version: 2.1.0
display_name: Full example
type: DistributedComponent
description: every kind of input
tags: {team: ml, stage: dev}
is_deterministic: false
inputs:
  mode: {type: Enum, enum: [fast, slow], default: fast}
  lr: {type: Float, default: 0.1, min: 0.0, max: 1.0}
  epochs: {type: Integer, default: 3, min: 1}
  verbose: {type: Boolean, default: true}
  note: {type: String, optional: true, description: free text}
  table: {type: AnyFile}
  data: {type: AnyDirectory, optional: true}
  raw: {type: path}
outputs:
  model: {type: AnyDirectory}
  report: {type: AnyFile}
launcher:
  type: mpi
  process_count_per_node: 4
  additional_arguments: >-
    python train.py --mode {inputs.mode} --lr={inputs.lr} --epochs {inputs.epochs} --verbose {inputs.verbose}
    [--note {inputs.note}] --table {inputs.table} [--data {inputs.data}] --raw {inputs.raw}
    --model {outputs.model} --report {outputs.report} --rank "$OMPI_COMM_WORLD_RANK" 'a;b'
environment:
  name: my-env
  version: "7"
environment_variables: {OMP_NUM_THREADS: "1", NCCL_DEBUG: INFO}
"""


def full_spec(tmp_path: Path, text: str = FULL_SPEC) -> Path:
    (tmp_path / "train.py").write_text("print('hi')\n")
    path = tmp_path / "component.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_every_field_maps(tmp_path: Path) -> None:
    path = full_spec(tmp_path)
    c = compile_to(path, tmp_path / "azure" / "component.yml")
    assert (c.name, c.version, c.display_name, c.description) == (
        "full_example_component", "2.1.0", "Full example", "every kind of input")
    assert c.tags == {"team": "ml", "stage": "dev"} and c.is_deterministic is False
    types = {n: (i.type, i.optional) for n, i in c.inputs.items()}
    assert types == {"mode": ("string", None), "lr": ("number", None), "epochs": ("integer", None),
                     "verbose": ("boolean", None), "note": ("string", True), "table": ("uri_file", None),
                     "data": ("uri_folder", True), "raw": ("uri_folder", None)}
    assert c.inputs["mode"].enum == ["fast", "slow"] and c.inputs["mode"].default == "fast"
    assert (c.inputs["lr"].default, c.inputs["lr"].min, c.inputs["lr"].max) == (0.1, 0.0, 1.0)
    assert (c.inputs["epochs"].default, c.inputs["epochs"].min) == (3, 1)
    assert c.inputs["verbose"].default is True and c.inputs["note"].description == "free text"
    assert {n: o.type for n, o in c.outputs.items()} == {"model": "uri_folder", "report": "uri_file"}
    assert c.environment == "my-env:7"  # azure-ai-ml keeps a registered environment's name without azureml:
    assert yaml.safe_load((tmp_path / "azure" / "component.yml").read_text())["environment"] == "azureml:my-env:7"
    assert c.environment_variables == {"MLFLOW_DISABLE_TELEMETRY": "true", "OMP_NUM_THREADS": "1", "NCCL_DEBUG": "INFO"}
    assert type(c.distribution).__name__ == "MpiDistribution" and c.distribution.process_count_per_instance == 4
    assert (tmp_path / "azure" / c.code).resolve() == tmp_path.resolve()
    assert "$[[--note ${{inputs.note}}]]" in c.command and "--lr=${{inputs.lr}}" in c.command
    assert "'a;b'" in c.command  # shell-quoted: Azure ML runs the command in a shell
    same_argv(load(path), c.command)


@pytest.mark.parametrize("environment,expected", [
    ("environment: {name: my-env}", "azureml:my-env@latest"),
    ("environment: azureml:AzureML-Minimal:1", "azureml:AzureML-Minimal:1"),
    ("environment: {docker: {image: 'nvcr.io/nvidia/pytorch:24.01-py3'}}",
     {"image": "nvcr.io/nvidia/pytorch:24.01-py3"}),
    ("environment: {docker: {image: 'python:3.11'}, conda: {conda_dependencies: {dependencies: [python=3.11]}}}",
     {"image": "python:3.11", "conda_file": {"dependencies": ["python=3.11"]}}),
])
def test_environment_mapping(environment: str, expected: Any, tmp_path: Path) -> None:
    text = FULL_SPEC.split("environment:\n")[0] + environment + "\n"
    compile_to(full_spec(tmp_path, text), tmp_path / "c.yml")
    assert yaml.safe_load((tmp_path / "c.yml").read_text())["environment"] == expected


def test_environment_flags_replace_the_specs(tmp_path: Path) -> None:
    path = full_spec(tmp_path)
    assert compile_to(path, tmp_path / "a.yml", environment="azureml:other:2").environment == "other:2"
    compile_to(path, tmp_path / "b.yml", image="python:3.12")
    assert yaml.safe_load((tmp_path / "b.yml").read_text())["environment"] == {"image": "python:3.12"}


def test_missing_code_folder_is_left_out_with_a_note(tmp_path: Path) -> None:
    compiled = compile_mapping(make_plan(load(str(PEERS / "azureml-v2-job-pytorch-cifar.yml")), gpu=False), tmp_path)
    assert "code" not in compiled.component
    assert any("code folder" in n and "does not exist" in n for n in compiled.notes)
    assert any("'cifar'" in n and "azureml:cifar-10-example:1" in n for n in compiled.notes)


# -- plugins bring their own distribution -----------------------------------------------------
def test_a_plugin_launcher_brings_its_own_distribution(tmp_path: Path) -> None:
    from tests.test_plugins import example_module

    pm = PluginManager()
    pm.load_builtins()
    pm.register_plugin(example_module("distcomp_launchers"), name="mine-launcher", provider="mypkg 1.0")
    spec = loads("name: m\ntype: DistributedComponent\nenvironment: azureml:e:1\n"
                 "launcher: {type: mine, additional_arguments: python x.py}\n", base_dir=tmp_path,
                 launchers=pm.alias_table())
    # none of its own: each instance runs distcomp's node agent
    agent = component_mapping(make_plan(spec.with_overrides(nodes=2), gpu=False, pm=pm), tmp_path, pm)
    assert agent.component["distribution"] == {"type": "pytorch", "process_count_per_instance": 1}
    assert "node agent" in " ".join(agent.notes) and "distcomp.agent" in agent.component["command"]
    # on one node its layout is one bare process (Topology.plain): a command job, its variables its own
    plain = component_mapping(make_plan(spec, gpu=False, pm=pm), tmp_path, pm)
    assert "distribution" not in plain.component and plain.component["command"] == "python x.py"
    assert plain.component["environment_variables"] == {"MY_RANK": "0", "MY_WORLD": "1", "MLFLOW_DISABLE_TELEMETRY": "true"}
    pm.register_plugin(example_module("distcomp_native_mappings"), name="mine-native", provider="mypkg 1.0")
    native = component_mapping(make_plan(spec, gpu=False, pm=pm), tmp_path, pm)
    assert native.component["distribution"] == {"type": "pytorch", "process_count_per_instance": 1}
    assert native.component["command"] == "python x.py"  # Azure's own distribution: no node agent
    assert "node agent" not in " ".join(native.notes)
    assert native.component["resources"] == {"instance_count": 1}


def test_built_in_launchers_each_have_a_distribution() -> None:
    pm = get_plugin_manager()
    mappings = {m.launcher: (m.kind, pm.native_provider(m)) for m in pm.native_mappings("azureml")}
    kinds = {"PyTorchDistribution": "pytorch", "MpiDistribution": "mpi", "TensorFlowDistribution": "tensorflow"}
    assert mappings == {n: (kinds[azure], "distcomp") for n, azure in AZURE_DISTRIBUTION.items()}


# -- an Azure ML pipeline of two distcomp components ------------------------------------------
def test_pipeline_of_two_distcomp_components_validates(tmp_path: Path) -> None:
    from azure.ai.ml.dsl import pipeline

    (tmp_path / "prep").mkdir()
    prep = azureml.load_component(full_spec(tmp_path / "prep"), nodes=2)
    train = azureml.load_component(REPO / "examples/pytorch-ddp/component.yaml", nodes=3, nproc_per_node=4)

    @pipeline(default_compute="cpu-cluster")
    def training(epochs=4):  # type: ignore[no-untyped-def]  # (azure reads annotations, not strings)
        first = prep(table="azureml:table:1", raw="azureml:raw:1")
        second = train(epochs=epochs, data=first.outputs.model)
        return {"model": second.outputs.model}

    job = training()
    result = job._validate()
    assert result.passed, result.error_messages
    steps = job.jobs
    assert type(steps["first"].distribution).__name__ == "MpiDistribution"
    assert steps["first"].resources.instance_count == 2
    assert type(steps["second"].distribution).__name__ == "PyTorchDistribution"
    assert (steps["second"].distribution.process_count_per_instance, steps["second"].resources.instance_count) == (4, 3)
    # the data flows from the first component's output into the second's input
    wired = job._to_dict()["jobs"]["second"]["inputs"]
    assert wired["data"] == {"path": "${{parent.jobs.first.outputs.model}}"}
    assert wired["epochs"] == {"path": "${{parent.inputs.epochs}}"}


# -- the CLI -------------------------------------------------------------------------------------
def distcomp(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "distcomp", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=120)


@pytest.mark.slow
def test_cli_compile_writes_a_component_azure_loads(tmp_path: Path) -> None:
    spec = REPO / "examples/pytorch-ddp/component.yaml"
    proc = distcomp("compile", "--target", "azureml", str(spec), "--out", "az/component.yml", "--nodes", "2",
                    cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "wrote Azure ML command component pytorch_ddp_example (pytorch distribution, 2 instance(s))" in proc.stderr
    assert "note: name 'pytorch-ddp-example' is 'pytorch_ddp_example'" in proc.stderr
    c = azure_load(tmp_path / "az/component.yml")
    assert c.resources.instance_count == 2 and c.distribution.process_count_per_instance == 2
    assert [p.name for p in (tmp_path / "az").iterdir()] == ["component.yml"]  # no temporary file left
    stdout = distcomp("compile", "--target", "azureml", str(spec), "--nodes", "2", cwd=tmp_path / "az")
    assert stdout.returncode == 0, stdout.stderr
    mark, _, written = (tmp_path / "az/component.yml").read_text().partition("\n")
    assert mark.startswith("# Written by distcomp")  # what --out may write again without --force
    assert stdout.stdout == written


@pytest.mark.parametrize("args,message", [
    (["--input", "epochs=3"], "--input does not apply to --target azureml: it is an option of --target local and --target kubeflow"),
    (["--trainer-v2"], "--trainer-v2 does not apply to --target azureml"),
    (["--environment", "azureml:e:1", "--image", "x"], "give --environment or --image, not both"),
])
def test_cli_refuses_flags_that_do_not_apply(args: list[str], message: str, tmp_path: Path) -> None:
    proc = distcomp("compile", "--target", "azureml", str(REPO / "examples/pytorch-ddp"), "--out", "c.yml", *args,
                    cwd=tmp_path)
    assert proc.returncode == 2 and message in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "c.yml").exists()


@pytest.mark.slow
def test_cli_reports_what_azure_refuses_and_writes_nothing(tmp_path: Path) -> None:
    (tmp_path / "component.yml").write_text(
        "type: command\nname: bad\ncommand: python x.py\nenvironment: azureml:e:1\n"
        "distribution: {type: pytorch, process_count_per_instance: 2}\n"
        "resources: {instance_count: 2, properties: 7}\n")
    previous = "# Written by distcomp (`distcomp compile --target azureml`); it may write this file again.\nprevious\n"
    (tmp_path / "c.yml").write_text(previous)  # an earlier output of distcomp's: --out may replace it
    proc = distcomp("compile", "--target", "azureml", "component.yml", "--out", "c.yml", cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr == ("distcomp compile: azure-ai-ml refuses the component: resources.properties: "
                           "Not a valid mapping type.\n")
    assert (tmp_path / "c.yml").read_text() == previous  # the earlier output is untouched


def test_cli_without_environment_says_what_to_give(tmp_path: Path) -> None:
    proc = distcomp("compile", "--target", "azureml", str(REPO / "tests/launchers/jobs/torch/component.yaml"),
                    "--out", "c.yml", cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "an Azure ML component needs one" in proc.stderr and "--environment azureml:NAME:VERSION" in proc.stderr
    assert not (tmp_path / "c.yml").exists()


def test_environment_flag_is_only_for_azureml(tmp_path: Path) -> None:
    proc = distcomp("compile", "--target", "kubeflow", str(REPO / "examples/pytorch-ddp"), "--environment",
                    "azureml:e:1", cwd=tmp_path)
    assert proc.returncode == 2 and "--environment does not apply to --target kubeflow: it is an option of --target azureml" in proc.stderr


def test_readme_pipeline_example_validates(monkeypatch: pytest.MonkeyPatch) -> None:
    """The docs' Azure ML example, as written, builds a pipeline azure-ai-ml validates."""
    page = (REPO / "docs" / "targets" / "azureml.md").read_text(encoding="utf-8")
    code = page.split("```python\n", 1)[1].split("```", 1)[0]
    monkeypatch.chdir(REPO)
    namespace: dict[str, Any] = {}
    exec(compile(code, "docs/targets/azureml.md", "exec"), namespace)
    job = namespace["training"](epochs=5)
    result = job._validate()
    assert result.passed, result.error_messages
    (step,) = job.jobs.values()
    assert step.resources.instance_count == 2 and type(step.distribution).__name__ == "PyTorchDistribution"
