"""Issue 35, first step: the shims kept for forms that never shipped are gone, and what a user
meets instead. (Each other removal is covered where its real code path is tested: the plugin
manager, the spec's launcher table, the MLflow backend, the KFP job options.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.test_bad_input import distcomp, files

REPO = Path(__file__).resolve().parents[1]
DDP = str(REPO / "examples" / "pytorch-ddp" / "component.yaml")


@pytest.mark.slow
def test_submit_without_a_target_is_refused_as_compile_is(tmp_path: Path) -> None:
    """``distcomp submit`` no longer means ``--target kubeflow`` (``DEFAULT_SUBMIT``): like
    ``compile``, it needs ``--target``, and is refused with exit 2 before anything exists."""
    for command in ("submit", "compile"):
        proc = distcomp(command, DDP, "--nodes", "2", "--image", "i:1", cwd=tmp_path)
        assert (proc.returncode, proc.stdout) == (2, ""), proc.stderr
        assert proc.stderr.splitlines()[-1] == (f"distcomp {command}: error: the following arguments are required: "
                                                "--target"), proc.stderr
        assert "Traceback" not in proc.stderr
    assert files(tmp_path) == set()  # no MLflow store, no run folder, no job record
