import sys
from pathlib import Path
from typing import Iterator

import pytest

# pytest caches the test modules it rewrites (their asserts) in __pycache__ unless bytecode
# writing is off, which this machine's PYTHONDONTWRITEBYTECODE sets: rewriting ~300 modules
# takes ~10 s of CPU per collection and per xdist worker. On for pytest's own process only:
# the jobs the tests start keep the user's setting.
sys.dont_write_bytecode = False


def _own_home() -> None:
    """A HOME and XDG_* folders of the test process's own (one per pytest process: an xdist
    worker gets its own), set before anything is imported, so no test reads or writes the
    user's ~/distcomp-slurm, ~/.local/state or ~/.local/share, and a newcomer's earlier jobs
    cannot fail the suite. Per process, not per test: the dev clusters and module-scoped jobs
    outlive a test, and their jobs must be found again under the HOME they were submitted in.
    Kept: caches that are shared on purpose (torch's compiled extensions, pip's cache) and
    the user's pip configuration (a private index)."""
    import atexit
    import os
    import pwd
    import shutil
    import tempfile

    real = os.environ.get("DISTCOMP_TESTS_REAL_HOME") or pwd.getpwuid(os.getuid()).pw_dir
    os.environ["DISTCOMP_TESTS_REAL_HOME"] = real  # xdist workers inherit the controller's own HOME
    cache = os.environ.get("XDG_CACHE_HOME") if "DISTCOMP_TESTS_HOME" not in os.environ else None
    cache = cache or os.path.join(real, ".cache")
    os.environ.setdefault("TORCH_EXTENSIONS_DIR", os.path.join(cache, "torch_extensions"))
    os.environ.setdefault("PIP_CACHE_DIR", os.path.join(cache, "pip"))
    for conf in (os.path.join(os.environ.get("XDG_CONFIG_HOME") or os.path.join(real, ".config"), "pip", "pip.conf"),
                 os.path.join(real, ".pip", "pip.conf")):
        if "PIP_CONFIG_FILE" not in os.environ and os.path.isfile(conf):
            os.environ["PIP_CONFIG_FILE"] = conf
    home = tempfile.mkdtemp(prefix="distcomp-tests-home-")
    os.environ["DISTCOMP_TESTS_HOME"] = os.environ["HOME"] = home
    atexit.register(shutil.rmtree, home, True)
    for name, sub in (("XDG_STATE_HOME", ".local/state"), ("XDG_DATA_HOME", ".local/share"),
                      ("XDG_CACHE_HOME", ".cache"), ("XDG_CONFIG_HOME", ".config")):
        os.environ[name] = os.path.join(home, sub)
        os.makedirs(os.environ[name], exist_ok=True)
    for name in ("DISTCOMP_SLURM_DIR", "DISTCOMP_REGISTRY"):  # the user's own: the defaults under this HOME
        os.environ.pop(name, None)


_own_home()

# fixtures every package uses, defined once: pytest keeps a session fixture per place it is
# defined, so a fixture imported into several conftests started one server (or made one MLflow
# store) per import, a dozen a worker
pytest_plugins = ("tests._mlflow_fixtures", "tests._s3server")

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
    _warm_start_caches(tmp_path_factory.mktemp("warm"))
    yield
    for name, value in (("XDG_CACHE_HOME", before), ("TORCH_EXTENSIONS_DIR", extensions)):
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


def _warm_start_caches(folder: Path) -> None:
    """The session's distcomp start caches (the records' generated methods, a spec's parse) filled
    by one real one-rank run, as a user's first run fills them. Where PYTHONDONTWRITEBYTECODE is
    set (this machine, CI) no process the tests start writes them, as Python's own bytecode rule
    has it, so each would compile every record's methods again: ~60 ms of each distcomp process
    (0.20 s against 0.14 s for `distcomp run`), thousands of them in the suite. The tests of the
    caches themselves use caches of their own."""
    import os
    import subprocess

    start = REPO / "benchmarks" / "jobs" / "start" / "component.yaml"  # one rank: `date +%s%N`
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    subprocess.run([sys.executable, "-m", "distcomp", "run", str(start), "--quiet", "--no-tracking", "--run-dir",
                    str(folder / "run")], env=env, cwd=folder, capture_output=True, timeout=120, check=False)


# A test on a dev cluster or a real `mlflow server` is slow: make test-fast starts neither (a
# server's start is ~9 s a worker). A fixture that asks for a server by getfixturevalue marks
# that param slow itself (pytest.param(..., marks=pytest.mark.slow)).
_SLOW_FIXTURES = ("slurm_cluster", "ray_cluster", "mlflow_server", "server_process", "own_server")


@pytest.hookimpl(wrapper=True)  # around every other plugin's: before -m deselects
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> Iterator[None]:
    for item in items:
        if any(f in getattr(item, "fixturenames", ()) for f in _SLOW_FIXTURES):
            item.add_marker(pytest.mark.slow)
    return (yield)


# Under pytest-xdist (make test runs workers), the tests of a dev cluster (tests/targets/slurm,
# tests/targets/ray: a cluster per package) run on one worker, so a run starts one Slurm and one
# Ray cluster, not one per worker; so do the README's commands, which run in order. Every other
# test goes to whichever worker is free. By folder, because the
# controller that schedules never sees the fixtures (xdist's own xdist_group marks are lost
# under pytest 9.2, whose node ids no longer take the group's suffix). The Ray tests that kill
# nodes start clusters of their own, so they are scheduled alone.
_GROUPS = (("tests/targets/slurm/", "slurm"), ("tests/targets/ray/", "ray"), ("tests/test_readme.py", "readme"))
_OWN_CLUSTERS = ("tests/targets/ray/test_killed_node.py", "tests/targets/ray/test_cluster_script.py")


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    from xdist.scheduler import LoadScopeScheduling

    class ByCluster(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            if not nodeid.startswith(_OWN_CLUSTERS):
                for folder, group in _GROUPS:
                    if nodeid.startswith(folder):
                        return group
            return nodeid

    return ByCluster(config, log)
