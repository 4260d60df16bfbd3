"""``distcomp registry ...`` as a user runs it: a real subprocess, exit codes, stderr, no tracebacks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from distcomp.registry import locate, open_registry
from distcomp.spec import bind_inputs, load
from tests.conftest import REPO
from tests.registry.conftest import Make

COMPONENTS = ("deepspeed-train", "mpi-allreduce-bench", "pytorch-ddp-train", "tf-multiworker-train")
README_NOTE = "distcomp registry: note: skipped components/README.md: not a spec file (.yaml) or a component folder\n"


def distcomp(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-m", "distcomp", *args], capture_output=True, text=True, cwd=REPO,
                          timeout=60, env=env)
    assert "Traceback" not in proc.stderr
    return proc


@pytest.fixture
def where(tmp_path: Path) -> str:
    return str(tmp_path / "registry")


def test_publish_the_shipped_library(where: str) -> None:
    everything = sorted(str(p.relative_to(REPO)) for p in (REPO / "components").iterdir())  # what `components/*` gives
    assert "components/README.md" in everything
    proc = distcomp("registry", "publish", *everything, "--registry", where)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == README_NOTE
    registry = open_registry(where)
    assert proc.stdout.splitlines() == [f"published {n}@1.0.0 (sha256 {registry.resolve(f'{n}@1.0.0').sha256[:12]})"
                                        for n in COMPONENTS]
    again = distcomp("registry", "publish", "components/*", "--registry", where)  # a pattern the shell left alone
    assert again.returncode == 0, again.stderr
    assert again.stdout.splitlines() == [f"{n}@1.0.0 already published (same content)" for n in COMPONENTS]

    spec = load(locate("pytorch-ddp-train@latest", where))
    assert (spec.name, spec.version, spec.distribution.launcher) == ("pytorch-ddp-train", "1.0.0", "torch.distributed")
    assert spec.code == Path(where) / "pytorch-ddp-train" / "1.0.0"
    shipped = REPO / "components" / "pytorch-ddp-train"
    assert (spec.code / "train.py").read_bytes() == (shipped / "train.py").read_bytes()
    assert (spec.code / "README.md").is_file()
    assert spec.render(bind_inputs(spec, {}, REPO), {"model": "/tmp/m"})[:4] == ["python", "train.py", "--epochs", "5"]


@pytest.mark.slow
def test_list_show_search(where: str) -> None:
    assert distcomp("registry", "publish", "components/*", "--registry", where).returncode == 0
    listed = distcomp("registry", "list", "--registry", where)
    assert listed.returncode == 0 and listed.stderr == ""
    assert [line.split()[:3] for line in listed.stdout.splitlines()] == [[n, "1.0.0", "1"] for n in COMPONENTS]
    data = json.loads(distcomp("registry", "list", "--json", "--registry", where).stdout)
    assert [(d["name"], d["latest"], d["versions"], d["deprecated"]) for d in data] == [
        (n, "1.0.0", 1, 0) for n in COMPONENTS]
    assert data[2]["display_name"] == "PyTorch DDP classifier training"
    assert data[2]["tags"] == {"framework": "pytorch", "task": "classification"}

    shown = distcomp("registry", "show", "pytorch-ddp-train", "--registry", where)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0] == "pytorch-ddp-train@1.0.0  PyTorch DDP classifier training"
    assert "  launcher: torch.distributed, 1 node(s) x 2 process(es)" in lines
    assert "  outputs: model (AnyDirectory)" in lines
    assert any(line.startswith("  inputs: epochs (integer, default 5), batch_size (integer, default 64)")
               for line in lines)
    assert f"  stored: {where}/pytorch-ddp-train/1.0.0/component.yaml" in lines
    assert lines[-1] == "  versions: 1.0.0"
    info = json.loads(distcomp("registry", "show", "pytorch-ddp-train@^1", "--json", "--registry", where).stdout)
    assert (info["name"], info["version"], info["deprecated"], info["files"]) == ("pytorch-ddp-train", "1.0.0", None, 3)
    assert info["spec"] == f"{where}/pytorch-ddp-train/1.0.0/component.yaml"
    assert info["inputs"]["epochs"] == {"type": "integer", "optional": False, "default": 5,
                                        "description": "Passes over the training split."}

    found = distcomp("registry", "search", "keras", "--registry", where)
    assert [line.split()[0] for line in found.stdout.splitlines()] == ["tf-multiworker-train"]
    tagged = json.loads(distcomp("registry", "search", "CLASSIFICATION", "--json", "--registry", where).stdout)
    assert [d["name"] for d in tagged] == ["pytorch-ddp-train", "tf-multiworker-train"]
    none = distcomp("registry", "search", "quantum", "--registry", where)
    assert (none.returncode, none.stdout) == (0, "")
    assert none.stderr == f"distcomp registry: nothing in the registry at {where} matches 'quantum'\n"


@pytest.mark.slow
def test_deprecate_and_undo(where: str) -> None:
    assert distcomp("registry", "publish", "components/pytorch-ddp-train", "--registry", where).returncode == 0
    proc = distcomp("registry", "deprecate", "pytorch-ddp-train@1.0.0", "-m", "use 2.0.0", "--registry", where)
    assert (proc.returncode, proc.stdout) == (0, "deprecated pytorch-ddp-train@1.0.0: use 2.0.0\n")
    shown = distcomp("registry", "show", "pytorch-ddp-train@1.0.0", "--registry", where)
    assert "  DEPRECATED: pytorch-ddp-train@1.0.0 is deprecated: use 2.0.0" in shown.stdout.splitlines()
    assert shown.stdout.splitlines()[-1] == "  versions: 1.0.0 (deprecated)"
    latest = distcomp("registry", "show", "pytorch-ddp-train@latest", "--registry", where)
    assert latest.returncode == 2
    assert latest.stderr == (f"distcomp registry: pytorch-ddp-train has no usable version in the registry at {where} "
                             "(every version is deprecated); 1.0.0 matches but is deprecated: name it exactly "
                             "(pytorch-ddp-train@1.0.0) to use it anyway\n")
    undo = distcomp("registry", "deprecate", "pytorch-ddp-train@1.0.0", "--undo", "--registry", where)
    assert undo.stdout == "pytorch-ddp-train@1.0.0 is no longer deprecated\n"
    again = distcomp("registry", "deprecate", "pytorch-ddp-train@1.0.0", "--undo", "--registry", where)
    assert again.stdout == "pytorch-ddp-train@1.0.0 was not deprecated\n"


def test_a_conflict_exits_2_and_the_others_still_publish(where: str, make: Make) -> None:
    first, other, fine = make(body="a\n"), make(body="b\n"), make(name="fine")
    assert distcomp("registry", "publish", str(first), "--registry", where).returncode == 0
    proc = distcomp("registry", "publish", str(other), str(fine), "--registry", where)
    assert proc.returncode == 2
    assert proc.stdout.startswith("published fine@1.0.0 (sha256 ")
    assert proc.stderr.startswith("distcomp registry: demo@1.0.0 is already published with different content")
    assert proc.stderr.count("\n") == 1


@pytest.mark.slow
def test_bad_input_exits_2_without_a_traceback(where: str, tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\ntype: DistributedComponent\nlauncher: {type: pytorc}\n")
    cases = [
        (("registry", "publish", str(bad)), f"distcomp registry: {bad}: not published: the spec is not valid:"),
        (("registry", "publish", str(tmp_path / "none.yaml")), f"distcomp registry: {tmp_path / 'none.yaml'}: not "
                                                               "published: the spec is not valid:"),
        (("registry", "publish", str(tmp_path)), f"distcomp registry: {tmp_path}: no component.yaml in this folder"),
        (("registry", "show", "nothing@1.0.0"), "distcomp registry: no component named 'nothing': the registry at"),
        (("registry", "show", "x@^y"), "distcomp registry: invalid version selector '^y' in 'x@^y'"),
        (("registry", "deprecate", "x"), "distcomp registry: 'x' is not a reference: expected NAME@VERSION"),
        (("registry", "list", "--registry", "s3://bucket"), "distcomp registry: registry 's3://bucket': unknown "
                                                            "registry store scheme 's3'; known schemes: file"),
    ]
    for args, start in cases:
        proc = distcomp(*args, *(() if "--registry" in args else ("--registry", where)))
        assert proc.returncode == 2, (args, proc.stderr)
        assert proc.stderr.startswith(start), (args, proc.stderr)
        assert proc.stdout == ""
    usage = distcomp("registry")
    assert usage.returncode == 2 and "ACTION" in usage.stderr


def test_the_registry_location_comes_from_the_environment(tmp_path: Path) -> None:
    env = {**os.environ, "DISTCOMP_REGISTRY": str(tmp_path / "from-env")}
    proc = distcomp("registry", "publish", "components/mpi-allreduce-bench", env=env)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "from-env" / "mpi-allreduce-bench" / "1.0.0" / "manifest.json").is_file()
    env = {k: v for k, v in os.environ.items() if k != "DISTCOMP_REGISTRY"}
    env.update(HOME=str(tmp_path / "home"), XDG_DATA_HOME=str(tmp_path / "data"))
    listed = distcomp("registry", "list", env=env)
    assert listed.returncode == 0
    assert listed.stderr == (f"distcomp registry: the registry at {tmp_path / 'data' / 'distcomp' / 'registry'} is "
                             "empty; publish with `distcomp registry publish SPEC`\n")
