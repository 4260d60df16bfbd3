"""The step for real under kfp.local's SubprocessRunner (no venv): KFP delivers the values, the
step runs `distcomp run`, every rank starts, and what each rank was given is what distcomp
renders, optional blocks included. The job is tests/targets/kfp/jobs/echo: each rank writes
its argv to the output folder."""

import json
import re
from pathlib import Path
from typing import Any

import pytest
from kfp import dsl
from kfp.components import load_component_from_file

from distcomp.kfp import compile_component, load_component
from tests.targets.kfp.conftest import ECHO


def ranks(folder: str) -> list[dict[str, Any]]:
    files = sorted(Path(folder).glob("rank*.json"))
    return [json.loads(f.read_text()) for f in files]


def test_step_starts_every_rank_with_the_values_distcomp_renders(kfp_local: Path) -> None:
    echo = load_component(ECHO)
    task = echo(name="a b; rm -rf /", flag=True, ratio=1e-05)
    out = task.outputs["out"]
    seen = ranks(out.path)
    assert [r["rank"] for r in seen] == [0, 1] and {r["world_size"] for r in seen} == {2}
    # One word per value, booleans and numbers as distcomp (and Azure ML) render them; the
    # optional inputs KFP did not deliver took their [ ... ] blocks with them.
    assert seen[0]["argv"] == ["--name", "a b; rm -rf /", "--count", "3", "--ratio", "1e-05", "--flag", "True",
                               "--mode", "fast", "--fail-rank", "-1", "--out", out.path]
    assert out.metadata["distcomp.processes"] == 2 and out.metadata["distcomp.attempts"] == 1
    assert str(kfp_local) in out.path  # the output artifact is KFP's, under the pipeline root


@pytest.mark.slow
def test_optional_blocks_appear_when_kfp_delivers_the_inputs(kfp_local: Path) -> None:
    echo = load_component(ECHO)

    @dsl.component(base_image="python:3.11")
    def make_extra(extra: dsl.Output[dsl.Dataset]):
        import os
        os.makedirs(extra.path, exist_ok=True)

    @dsl.pipeline(name="echo-optional")
    def pipeline(opt: float = 0.25) -> dsl.Model:
        made = make_extra()
        return echo(name="x", opt=opt, extra=made.outputs["extra"]).outputs["out"]

    out = pipeline().output
    argv = ranks(out.path)[0]["argv"]
    extra = argv[argv.index("--extra") + 1]
    assert argv[argv.index("--opt") + 1] == "0.25"
    assert Path(extra).is_dir() and extra.startswith(str(kfp_local)) and extra.endswith("make-extra/extra")


def test_nproc_per_node_override_starts_that_many_ranks(kfp_local: Path) -> None:
    out = load_component(ECHO, nproc_per_node=3)(name="x").outputs["out"]
    assert [r["world_size"] for r in ranks(out.path)] == [3, 3, 3]


@pytest.mark.slow
def test_a_failed_rank_fails_the_step_with_distcomp_root_cause(kfp_local: Path,
                                                              capfd: pytest.CaptureFixture[str]) -> None:
    echo = load_component(ECHO)
    with pytest.raises(RuntimeError, match="FAILURE"):
        echo(name="x", fail_rank=1)
    out = capfd.readouterr()
    text = out.out + out.err
    assert re.search(r"job failed: rank1 \(worker, node 0.*\) exited with code 3", text)
    assert "distcomp run exited with code 1" in text


@pytest.mark.slow
def test_the_compiled_file_runs_as_a_component(kfp_local: Path, tmp_path: Path) -> None:
    path = compile_component(ECHO, tmp_path / "echo.yaml")
    assert _bundle_names(path) == ["component.yaml", "code/component.yaml", "code/echo.py"]
    out = load_component_from_file(str(path))(name="from the file", count=7).outputs["out"]
    assert ranks(out.path)[1]["argv"][:4] == ["--name", "from the file", "--count", "7"]


def test_code_already_in_the_image_is_used_in_place(kfp_local: Path, tmp_path: Path) -> None:
    # code_path: the step carries only the spec; here "the image" is this machine.
    path = compile_component(ECHO, tmp_path / "echo.yaml", code_path=str(ECHO.parent))
    assert "echo.py" not in _bundle_names(path)
    out = load_component_from_file(str(path))(name="x").outputs["out"]
    assert len(ranks(out.path)) == 2


def _bundle_names(compiled: Path) -> list[str]:
    """The files embedded in a compiled component (its step's base64 tar.gz)."""
    import base64
    import gzip
    import io
    import tarfile

    import yaml

    (executor,) = yaml.safe_load(compiled.read_text())["deploymentSpec"]["executors"].values()
    source = max(executor["container"]["command"], key=len)
    chunks = re.findall(r"^ {12}'([A-Za-z0-9+/=]+)'$", source.split("# the spec and its code")[1], re.M)
    data = gzip.decompress(base64.b64decode("".join(chunks)))
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        return tar.getnames()


def test_a_shell_line_runs_in_the_step_as_on_azure_ml(kfp_local: Path) -> None:
    """`cd sub && ... --seen "$RANK"`: the step's ranks run the author's shell line; the value
    (shell syntax in it) is one argument and runs nothing."""
    shell = Path(__file__).resolve().parents[1] / "jobs" / "shellline" / "torch.yaml"
    out = load_component(shell)(value="x; touch pwned").outputs["out"]
    records = [json.loads(p.read_text()) for p in sorted(Path(out.path).glob("*.json"))]
    assert len(records) == 2
    for rec in records:
        argv = rec["argv"]
        assert rec["cwd"].endswith("/sub") and argv[argv.index("--value") + 1] == "x; touch pwned"
    assert sorted(r["argv"][r["argv"].index("--seen") + 1] for r in records) == ["0", "1"]
    assert not list(Path(records[0]["cwd"]).parent.rglob("pwned"))
