from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# public reference files (peer specs, Kubeflow CRDs), copied in: see tests/reference/README.md
REFERENCE = REPO / "tests" / "reference"
CORPUS = Path(__file__).resolve().parent / "spec" / "corpus"


@pytest.fixture
def write_spec(tmp_path: Path):
    """Write spec text to a file and return its path."""
    def write(text: str, name: str = "component.yaml") -> Path:
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        return path
    return write
