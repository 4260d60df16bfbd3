"""``distcomp.validate``, ``render`` and ``schema`` called directly: the records that
``distcomp validate|render|schema`` print (tests/test_cli.py runs the commands)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

import distcomp
from distcomp.errors import UsageError
from distcomp.spec import InputError, json_schema
from tests.conftest import CORPUS, REFERENCE, REPO


def test_validate_reports_what_runs_for_a_valid_spec() -> None:
    path = sorted((CORPUS / "valid").glob("*.y*ml"))[0]  # seed 003's MPI job, with its own mpirun
    report = distcomp.validate(path)
    assert isinstance(report, distcomp.ValidationReport) and report.ok and report.exit_code == 0
    (check,) = report.files
    assert (check.path, check.ok, check.errors, check.launcher, check.nodes, check.processes_per_node) == (
        str(path), True, (), "mpi", 4, 4)
    assert check.layout == "the command's own mpirun, once on the first node"
    assert check.spec is not None and check.spec.ref == "draft-mpi"
    assert check.summary() == "draft-mpi (mpi, 4 nodes x 4 processes; the command's own mpirun, once on the first node)"
    with pytest.raises(dataclasses.FrozenInstanceError):
        check.nodes = 1  # type: ignore[misc]


def test_validate_reports_each_error_and_goes_on() -> None:
    good = CORPUS / "valid" / "sdk-minimal.yaml"
    bad = CORPUS / "invalid" / "unknown-launcher.yaml"
    report = distcomp.validate(str(good), str(bad))
    assert not report.ok and report.exit_code == 2
    assert [c.path for c in report.files] == [str(good), str(bad)] and report.invalid == (report.files[1],)
    failed = report.files[1]
    expected = [f"{bad}:{line}" for line in bad.with_suffix(".expected").read_text().splitlines()]
    assert [str(d) for d in failed.diagnostics] == expected and failed.spec is None
    assert failed.summary() == "invalid (1 error)"
    assert report.files[0].summary() == "minimal (mpi, 1 node x 1 process)"


def test_validate_keeps_warnings_apart_from_errors() -> None:
    report = distcomp.validate(REFERENCE / "peer-specs" / "azureml-v2-job-horovod-mpi.yml")
    (check,) = report.files
    assert check.ok and check.errors == ()
    assert any(d.severity == "warning" and "code folder 'src' does not exist" in str(d) for d in check.diagnostics)


@pytest.mark.slow
def test_validate_a_folder_stands_for_its_component_files(tmp_path: Path) -> None:
    report = distcomp.validate(REPO / "components")
    assert [Path(c.path).parent.name for c in report.files] == ["deepspeed-train", "mpi-allreduce-bench",
                                                                "pytorch-ddp-train", "tf-multiworker-train"]
    assert report.ok
    hidden = tmp_path / ".venv" / "component.yaml"  # hidden folders (a virtualenv's packages) are not the user's
    hidden.parent.mkdir()
    hidden.write_text("not: a spec\n")
    with pytest.raises(UsageError, match=f"^{tmp_path}: no component.yaml under this folder$"):
        distcomp.validate(tmp_path)


def test_render_returns_the_masked_line_and_argv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = REFERENCE / "peer-specs" / "azureml-v1-distributed-mpi.yaml"
    rendered = distcomp.render(spec, inputs={"input_path": "/data", "string_parameter": "a b; rm -rf /"},
                               outputs={"output_path": "/out"})
    assert isinstance(rendered, distcomp.Rendered)
    assert rendered.line == "python train.py --input-path /data --string-parameter 'a b; rm -rf /' --output-path /out"
    assert rendered.argv == ("python", "train.py", "--input-path", "/data", "--string-parameter", "a b; rm -rf /",
                             "--output-path", "/out")
    assert dict(rendered.outputs) == {"output_path": "/out"}

    monkeypatch.chdir(tmp_path)  # outputs default under the current folder
    secret = Path(__file__).parent / "targets" / "jobs" / "supervision" / "component.yaml"
    masked = distcomp.render(secret, inputs={"mode": "secret", "state_dir": "/s", "db_password": "hunter2-Sup3r"},
                             outputs={"result": "/out"})
    assert masked.line.endswith("--state-dir /s --password *** --result /out")
    assert masked.argv[masked.argv.index("--password") + 1] == "***" and "hunter2" not in repr(masked)

    horovod = distcomp.render(CORPUS / "valid" / "sdk-horovod.yaml", env={"AZUREML_MPI_HOSTFILE": "/tmp/my hosts"})
    assert horovod.argv == ("/bin/sh", "-c", "python src/train.py --hostfile '/tmp/my hosts'")
    v2 = distcomp.render(CORPUS / "valid" / "v2-component.yml", inputs={"data": "d"})
    assert v2.outputs["model"] == str(tmp_path / "outputs" / "model")


def test_render_raises_the_input_errors_the_cli_prints() -> None:
    spec = CORPUS / "valid" / "sdk-full.yaml"
    with pytest.raises(InputError, match=r"^unknown output 'nope' \(expected one of: model\)\nmissing required"):
        distcomp.render(spec, inputs={"epochs": "many"}, outputs={"nope": "/x"})
    with pytest.raises(InputError) as caught:
        distcomp.render(spec, inputs={"epochs": "many"})
    assert str(caught.value).splitlines() == ["missing required input 'data' (give it with --input data=VALUE)",
                                              "input 'epochs' must be an integer, got 'many'"]
    with pytest.raises(UsageError, match="inputs.optimizer.default"):
        distcomp.render(CORPUS / "invalid" / "enum-default.yaml")


def test_schema_is_the_generated_one_and_refuses_an_unknown_dialect() -> None:
    assert distcomp.schema() == json_schema("sdk")
    assert distcomp.schema("v2") == json_schema("v2")
    with pytest.raises(UsageError, match="unknown dialect 'v3'; expected one of: sdk, v2, draft"):
        distcomp.schema("v3")
