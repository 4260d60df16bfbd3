"""kfp.local sessions for the KFP target's tests: SubprocessRunner in this environment (no
venv, nothing installed), outputs and the step's working folder in the test's tmp_path."""

from pathlib import Path
from typing import Iterator

import pytest

ECHO = Path(__file__).resolve().parent / "jobs" / "echo" / "component.yaml"


@pytest.fixture
def kfp_local(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A kfp.local session whose pipeline root is ``tmp_path/root``; tracking off unless a test
    sets MLFLOW_TRACKING_URI (the steps inherit this process's environment and folder)."""
    from kfp import local

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # the step unpacks there (and keeps a failed job's logs)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.delenv("MLFLOW_RUN_ID", raising=False)
    local.init(runner=local.SubprocessRunner(use_venv=False), pipeline_root=str(tmp_path / "root"),
               workspace_root=str(tmp_path / "workspace"))
    yield tmp_path / "root"
