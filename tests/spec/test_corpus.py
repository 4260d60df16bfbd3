"""The valid/invalid corpus: every valid spec loads clean; every invalid one gives exactly
the diagnostics in its .expected file (full text, line and column).

PyYAML's own wording changes between releases (6.0.4 did) and its version is not pinned, so
an .expected file writes ``{yaml_problem}`` for it: PyYAML's problem for that file, asked from
the loader distcomp reads with. Everything distcomp says around it is still compared exactly."""

from pathlib import Path

import pytest
import yaml

from distcomp.spec import SpecError, check_file, load
from tests.conftest import CORPUS

VALID = sorted((CORPUS / "valid").glob("*.y*ml"))
INVALID = sorted((CORPUS / "invalid").glob("*.y*ml"))


def test_corpus_is_not_empty() -> None:
    assert len(VALID) >= 10 and len(INVALID) >= 20


@pytest.mark.parametrize("path", VALID, ids=lambda p: p.name)
def test_valid_spec_loads_without_diagnostics(path: Path) -> None:
    result = check_file(path)
    assert result.spec is not None, "\n".join(map(str, result.diagnostics))
    assert result.diagnostics == ()


def yaml_problem(path: Path) -> str:
    """What PyYAML says is wrong with ``path``, in the words of the installed release."""
    with pytest.raises(yaml.MarkedYAMLError) as info:
        yaml.compose(path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    assert info.value.problem
    return info.value.problem


def expected_diagnostics(path: Path) -> list[str]:
    text = path.with_suffix(".expected").read_text()
    if "{yaml_problem}" in text:
        text = text.replace("{yaml_problem}", yaml_problem(path))
    return [f"{path}:{line}" for line in text.splitlines()]


@pytest.mark.parametrize("path", INVALID, ids=lambda p: p.name)
def test_invalid_spec_reports_expected_errors(path: Path) -> None:
    result = check_file(path)
    assert result.spec is None
    expected = expected_diagnostics(path)
    assert [str(d) for d in result.diagnostics] == expected
    with pytest.raises(SpecError) as info:
        load(path)
    assert str(info.value) == "\n".join(str(d) for d in result.errors)


def test_every_error_class_of_the_issue_is_covered() -> None:
    """The invalid corpus exercises each error the validator promises."""
    text = "\n".join(p.read_text() for p in CORPUS.glob("invalid/*.expected"))
    for needle in ("YAML syntax error", "the document is not a mapping", "unknown launcher",
                   "reference to undeclared input", "reference to undeclared output",
                   "is used outside an optional block", "unbalanced '['", "unbalanced ']'",
                   "unbalanced '$[['", "unbalanced ']]'", "wrong type (expected an integer",
                   "not one of the enum values (expected one of:", "min is greater than max",
                   "launcher.node_count: out of range (expected a positive integer, got 0)",
                   "process_count_per_node: out of range", "did you mean 'default'?", "did you mean 'launcher'?",
                   "did you mean 'epochs'?", "duplicate key", "holds a NUL byte (\\0)"):
        assert needle in text, needle


def test_many_errors_are_reported_in_one_pass() -> None:
    result = check_file(CORPUS / "invalid" / "many-errors.yaml")
    assert len(result.errors) == 10
    paths = [d.path for d in result.errors]
    assert "launcher.type" in paths and "inputs.epochs.default" in paths and "launcher.additional_arguments" in paths


def test_full_spec_model() -> None:
    spec = load(CORPUS / "valid" / "sdk-full.yaml")
    assert (spec.name, spec.version, spec.display_name) == ("org.example.full_ddp", "1.2.0", "Full DDP example")
    d = spec.distribution
    assert (d.launcher, d.nodes, d.processes_per_node) == ("torch.distributed", 2, 4)
    i = spec.inputs
    assert (i["data"].kind, i["data"].holds, i["config"].holds, i["config"].optional) == ("port", "folder", "file", True)
    assert (i["epochs"].type, i["epochs"].default, i["epochs"].min, i["epochs"].max) == ("integer", 3, 1, 100)
    assert (i["lr"].type, i["lr"].default) == ("number", 0.01)
    assert (i["amp"].type, i["amp"].default) == ("boolean", False)
    assert (i["optimizer"].type, i["optimizer"].enum, i["optimizer"].default) == ("enum", ("sgd", "adam"), "adam")
    assert spec.outputs["model"].type == "AnyDirectory"
    assert spec.environment is not None and spec.environment.image == "python:3.11-slim"
    assert spec.environment.conda["name"] == "ddp"
    assert dict(spec.environment_variables) == {"NCCL_DEBUG": "INFO", "OMP_NUM_THREADS": "1"}
    assert dict(spec.tags) == {"team": "ml", "owner": ""}
    assert spec.code == (CORPUS / "valid").resolve()
    assert spec.source == (CORPUS / "valid" / "sdk-full.yaml").resolve()
    assert spec.is_deterministic is True


def test_spec_is_immutable() -> None:
    spec = load(CORPUS / "valid" / "sdk-full.yaml")
    with pytest.raises(AttributeError):
        spec.name = "other"  # type: ignore[misc]
    with pytest.raises(TypeError):
        spec.inputs["x"] = spec.inputs["data"]  # type: ignore[index]
    more = spec.with_overrides(nodes=3, processes_per_node=1)
    assert (more.distribution.nodes, more.distribution.processes_per_node) == (3, 1)
    assert (spec.distribution.nodes, spec.distribution.processes_per_node) == (2, 4)


@pytest.mark.parametrize("name, launcher, nodes, ppn, workers, ps", [
    ("sdk-launcher-alias.yaml", "torch.distributed", 1, None, None, 0),
    ("sdk-horovod.yaml", "mpi", 1, 2, None, 0),
    ("sdk-tensorflow-ps.yaml", "tensorflow.distributed", 2, 2, 4, 1),
    ("sdk-deepspeed.yaml", "deepspeed", 1, 2, None, 0),
    ("v2-component.yml", "torch.distributed", 2, 2, None, 0),
    ("v2-job-tensorflow.yml", "tensorflow.distributed", 2, 1, 2, 0),
    ("draft-mpi.yml", "mpi", 4, 4, None, 0),
    ("draft-pytorch-k8s.yml", "torch.distributed", 4, None, None, 0),
    ("draft-tensorflow-ps.yml", "tensorflow.distributed", 2, 1, 2, 4),
])
def test_topology_of_each_dialect(name: str, launcher: str, nodes: int, ppn: int | None, workers: int | None, ps: int) -> None:
    d = load(CORPUS / "valid" / name).distribution
    assert (d.launcher, d.nodes, d.processes_per_node, d.worker_count, d.parameter_server_count) == (
        launcher, nodes, ppn, workers, ps)


def test_draft_keeps_role_overrides() -> None:
    spec = load(CORPUS / "valid" / "draft-tensorflow-ps.yml")
    ps = spec.distribution.role("parameter_server")
    assert ps is not None and ps.count == 4
    assert ps.environment is not None and ps.environment.image == "docker.io/python"
    assert dict(ps.environment_variables) == {"MAGIC": "newnumber"}
    assert ps.resources["limits"] == {"gpu": 4, "memory": "2Gi"}
    assert dict(spec.environment_variables) == {"MAGIC": "number"}
    assert spec.code == (CORPUS / "valid" / "src").resolve()


def test_v2_job_literal_inputs_become_typed_defaults() -> None:
    spec = load(CORPUS / "valid" / "v2-job-tensorflow.yml")
    assert (spec.inputs["epochs"].type, spec.inputs["epochs"].default) == ("integer", 1)
    assert (spec.inputs["model_dir"].type, spec.inputs["model_dir"].default) == ("string", "outputs/keras-model")
    assert spec.name == "v2-job-tensorflow"
