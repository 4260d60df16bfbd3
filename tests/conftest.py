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


@pytest.fixture(autouse=True, scope="session")
def _job_records(tmp_path_factory: pytest.TempPathFactory):
    """The core's job records (``$XDG_STATE_HOME/distcomp/jobs``) of every job a test submits,
    and of the processes it starts, in the session's own folder, not the user's."""
    import os

    before = os.environ.get("XDG_STATE_HOME")
    os.environ["XDG_STATE_HOME"] = str(tmp_path_factory.mktemp("state"))
    yield
    if before is None:
        os.environ.pop("XDG_STATE_HOME", None)
    else:
        os.environ["XDG_STATE_HOME"] = before


@pytest.fixture(autouse=True, scope="session")
def _function_cache(tmp_path_factory: pytest.TempPathFactory):
    """distcomp's cache (``$XDG_CACHE_HOME/distcomp``: function components' spec files, the
    registry's bytecode) in the session's own folder, not the user's ~/.cache."""
    import os

    before = os.environ.get("XDG_CACHE_HOME")
    extensions = os.environ.get("TORCH_EXTENSIONS_DIR")
    # DeepSpeed's compiled CPU ops stay in torch's usual cache (a minute to build, valid across runs)
    os.environ["TORCH_EXTENSIONS_DIR"] = extensions or os.path.join(
        before or os.path.join(os.path.expanduser("~"), ".cache"), "torch_extensions")
    os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("cache"))
    yield
    for name, value in (("XDG_CACHE_HOME", before), ("TORCH_EXTENSIONS_DIR", extensions)):
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


# Under pytest-xdist (make test runs several workers), the tests that share a session's dev
# cluster run on one worker, so the session starts one Slurm cluster and one Ray cluster, not
# one per worker.
_SHARED_CLUSTERS = {"slurm_cluster": "slurm", "ray_cluster": "ray"}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        for fixture, group in _SHARED_CLUSTERS.items():
            if fixture in getattr(item, "fixturenames", ()):
                item.add_marker(pytest.mark.xdist_group(group))
                break
