"""What cannot become a KFP step says why, from distcomp, before kfp is involved."""

import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import pytest

from distcomp.kfp import KfpTargetError, load_component
from distcomp.spec import loads
from tests.conftest import REPO
from tests.targets.kfp.conftest import ECHO

PLUGIN = REPO / "plugin" / "distcomp"

SPEC = """\
name: t
type: DistributedComponent
inputs:
{inputs}
outputs:
  out: {{type: AnyDirectory}}
launcher:
  type: pytorch
  additional_arguments: python run.py {refs} --out {{outputs.out}}
"""


def raises(call: Callable[[], Any], *fragments: str) -> str:
    """The KfpTargetError message; the error comes from distcomp itself, with no chained kfp error."""
    with pytest.raises(KfpTargetError) as info:
        call()
    message = str(info.value)
    for fragment in fragments:
        assert fragment in message
    assert Path(info.traceback[-1].path).is_relative_to(PLUGIN)
    assert info.value.__cause__ is None
    return message


def spec_with(tmp_path: Path, **inputs: str) -> Path:
    (tmp_path / "run.py").write_text("")
    lines = "\n".join(f"  {name}: {{type: {kind}}}" for name, kind in inputs.items())
    refs = " ".join(f"{{inputs.{name}}}" for name in inputs)
    path = tmp_path / "component.yaml"
    path.write_text(SPEC.format(inputs=lines, refs=refs))
    return path


def test_missing_file(tmp_path: Path) -> None:
    raises(lambda: load_component(tmp_path / "nope.yaml"), "nope.yaml", "no such file")
    raises(lambda: load_component(tmp_path), "component.yaml", "no such file")  # a folder without one


def test_bad_spec_lists_every_problem_with_its_place(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(ECHO.read_text().replace("torch.distributed", "pytorc").replace("{inputs.count}", "{inputs.cont}"))
    message = raises(lambda: load_component(bad), "unknown launcher 'pytorc'", "undeclared input 'cont'")
    assert message.count(str(bad)) == 2


def test_not_a_spec_at_all(tmp_path: Path) -> None:
    raises(lambda: load_component(42), "expected a ComponentSpec or the path of a spec file, got int")  # type: ignore[arg-type]
    raises(lambda: load_component(loads(ECHO.read_text(), base_dir=ECHO.parent)), "not loaded from one")


def test_more_than_one_node_is_the_kubeflow_target() -> None:
    raises(lambda: load_component(ECHO, nodes=2), "2 nodes", "--target kubeflow")
    raises(lambda: load_component(ECHO, nproc_per_node=0), "nproc_per_node must be a whole number >= 1")


def test_names_kfp_cannot_take(tmp_path: Path) -> None:
    path = spec_with(tmp_path, **{"class": "Integer", "ok": "String", "Output": "String"})
    message = raises(lambda: load_component(path), "input 'class' cannot be a KFP parameter name",
                     "input 'Output' cannot")
    assert "'ok'" not in message


def test_a_code_folder_too_large_to_embed_names_its_largest_files(tmp_path: Path) -> None:
    path = spec_with(tmp_path, x="Integer")
    (tmp_path / "weights.bin").write_bytes(os.urandom(150_000))  # random: gzip cannot shrink it
    raises(lambda: load_component(path), "over the 128 KiB", "weights.bin (146 KiB)", "code_path=")
    assert load_component(path, code_path="/app").name == "t"  # code in the image: nothing to embed


def test_importing_distcomp_kfp_imports_no_kfp() -> None:
    code = "import sys, distcomp, distcomp.kfp; assert 'kfp' not in sys.modules, 'kfp was imported'"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.slow
def test_compile_takes_code_path_as_python_does(tmp_path: Path) -> None:
    """Python's message names the keyword, the CLI's its flag (issue 34), and the CLI takes it."""
    path = spec_with(tmp_path, x="Integer")
    (tmp_path / "weights.bin").write_bytes(os.urandom(150_000))
    raises(lambda: load_component(path), "give its folder there: code_path=PATH")

    def cli(*extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "distcomp", "compile", "--target", "kfp", str(path),
                               "--out", str(tmp_path / "step.yaml"), *extra],
                              capture_output=True, text=True, timeout=300)

    over = cli()
    assert over.returncode == 2 and "--code-path PATH" in over.stderr and "Traceback" not in over.stderr
    assert "code_path=" not in over.stderr
    relative = cli("--code-path", "app")
    assert relative.returncode == 2 and "absolute path inside the image" in relative.stderr
    assert not (tmp_path / "step.yaml").exists()  # nothing half-written
    done = cli("--code-path", "/app", "--image", "registry.example/t:1")  # the image that holds /app
    assert done.returncode == 0, done.stderr
    # the step embeds the spec alone (its code: /app), not the 146 KiB of the code folder
    assert (tmp_path / "step.yaml").stat().st_size < 100_000
