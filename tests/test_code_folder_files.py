"""A code folder holding a FIFO or a socket, through the real `distcomp` command: every command
that packs or copies the code (compile --target mlflow|kfp|kubeflow, registry publish; submit
--target slurm in tests/targets/slurm) refuses it alike, in one line naming the file, exit 2,
and writes nothing: no half-copied project, no bundle, no stored version, never blocked reading
the FIFO."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest

SPEC = """\
name: pipes
version: 1.0.0
type: DistributedComponent
launcher:
  type: torch.distributed
  process_count_per_node: 1
  additional_arguments: python main.py
"""
KINDS = {"fifo": "a FIFO (named pipe)", "socket": "a socket"}


@pytest.fixture(params=sorted(KINDS))
def special(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Path, Path, str]]:
    """A code folder whose sub/ holds a special file; (folder, the file, what it is)."""
    code = tmp_path / "comp"
    (code / "sub").mkdir(parents=True)
    (code / "component.yaml").write_text(SPEC)
    (code / "main.py").write_text("print('hi')\n")
    path = code / "sub" / "x"
    server = None
    if request.param == "fifo":
        os.mkfifo(path)
    else:
        server = socket.socket(socket.AF_UNIX)
        server.bind(str(path))
    try:
        yield code, path, KINDS[request.param]
    finally:
        if server is not None:
            server.close()


def distcomp(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DISTCOMP_REGISTRY": str(cwd / "registry")}
    env.pop("MLFLOW_TRACKING_URI", None)
    return subprocess.run([sys.executable, "-m", "distcomp", *args], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=120)


@pytest.mark.parametrize("command, prefix", [
    # the MLflow project and the KFP step carry what every delivery ships: its rules and words
    (["compile", "--target", "mlflow", "comp", "--out", "out"],
     "distcomp compile: the code folder cannot be shipped: {code}/component.yaml: "),
    (["compile", "--target", "kfp", "comp", "--out", "out.yaml"],
     "distcomp compile: the code folder cannot be shipped: {code}/component.yaml: "),
    (["compile", "--target", "kubeflow", "comp", "--out", "out"],
     "distcomp compile: the code folder cannot be shipped: {code}/component.yaml: "),
    (["registry", "publish", "comp"], "distcomp registry: {code}/component.yaml: "),
], ids=["mlflow", "kfp", "kubeflow", "registry-publish"])
def test_a_special_file_in_the_code_folder_is_refused_in_one_line(special: tuple[Path, Path, str],
                                                                  command: list[str], prefix: str) -> None:
    code, path, kind = special
    proc = distcomp(*command, cwd=code.parent)
    assert "Traceback" not in proc.stderr and "Error(" not in proc.stderr
    assert (proc.returncode, proc.stdout) == (2, ""), proc.stderr
    assert proc.stderr.splitlines() == [
        prefix.format(code=code) + f"{str(path)!r} in the code folder is {kind}, not a regular file: a code folder "
        "holds files and folders; remove it, or move it out of the code folder"]
    assert sorted(p.name for p in code.parent.iterdir() if p.name != "registry") == ["comp"]  # no out
    assert not [p for p in (code.parent / "registry").rglob("*") if not p.is_dir()]  # no stored version


@pytest.mark.parametrize("command, said", [
    (["compile", "--target", "mlflow", "comp", "--out", "out"],  # as the shared code delivery says it
     "the code folder cannot be shipped: {spec}: {path} in the code folder is a symbolic link that leads nowhere; "
     "remove it to publish"),
    (["compile", "--target", "kfp", "comp", "--out", "out.yaml"],  # as the shared code delivery (Kubeflow) says it
     "the code folder cannot be shipped: {spec}: {path} in the code folder is a symbolic link that leads nowhere; "
     "remove it to publish"),
], ids=["mlflow", "kfp"])
def test_a_link_that_leads_nowhere_is_refused_in_one_line(tmp_path: Path, command: list[str], said: str) -> None:
    """MLflow's copy gave copytree's raw list of failures; the KFP bundle left the file out silently."""
    code = tmp_path / "comp"
    code.mkdir()
    (code / "component.yaml").write_text(SPEC)
    (code / "main.py").write_text("print('hi')\n")
    (code / "data").symlink_to("/nonexistent/data")
    proc = distcomp(*command, cwd=tmp_path)
    assert (proc.returncode, proc.stdout) == (2, ""), proc.stderr
    assert proc.stderr.splitlines() == [
        "distcomp compile: " + said.format(path=str(code / "data"), spec=code / "component.yaml")]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["comp"]
