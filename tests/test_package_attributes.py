"""Every public submodule of distcomp is an attribute of the package after a bare ``import
distcomp`` (issue 34), loaded on first use: ``import distcomp`` alone imports none of them, nor
mlflow, kfp or torch. And a real function component that only did ``import distcomp`` logs
through ``distcomp.runtime.log_metrics`` into its job's MLflow run."""

from __future__ import annotations

import json
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest
from mlflow import MlflowClient

import distcomp

from .function.conftest import distcomp as distcomp_cli, explain
from .targets.conftest import _kill_leftovers  # noqa: F401  (autouse: no rank outlives a test)

PUBLIC = sorted(m.name for m in pkgutil.iter_modules(distcomp.__path__) if not m.name.startswith("_"))


def _fresh(code: str) -> dict[str, object]:
    """``code`` in a new interpreter (nothing imported before it); its last line of stdout, as JSON."""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result: dict[str, object] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def test_the_list_is_the_package_folder() -> None:
    assert {"runtime", "registry", "kfp", "azureml", "function", "errors"} <= set(PUBLIC)
    assert sorted(distcomp._SUBMODULES) == PUBLIC  # a new public module is an attribute too
    assert set(PUBLIC) <= set(dir(distcomp))


def test_bare_import_loads_nothing_heavy_and_no_submodule() -> None:
    got = _fresh("import json, sys, distcomp\n"
                 "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in "
                 "('distcomp', 'mlflow', 'kfp', 'torch', 'azure', 'tensorflow', 'ray'))))")
    # base.launchernames and base.lazy (stdlib only, in base, a package of a docstring): where
    # __init__ hands the spec layer its launcher lookups (issue 35); base.methodcache (stdlib only):
    # the records' generated methods, compiled once (issue 38), kept where base.cachedir (os only)
    # says distcomp's cache is
    assert got == ["distcomp", "distcomp.base", "distcomp.base.cachedir", "distcomp.base.launchernames",
                   "distcomp.base.lazy", "distcomp.base.methodcache"]


@pytest.mark.slow
def test_each_public_submodule_is_an_attribute_after_a_bare_import() -> None:
    got = _fresh(f"""
import json, sys, types
import distcomp
info = distcomp.runtime.rank_info  # the issue's case: no `import distcomp.runtime` before
heavy = sorted(m for m in ('mlflow', 'kfp', 'torch') if m in sys.modules)
mods = {{name: getattr(distcomp, name).__name__ for name in {PUBLIC!r}}}
print(json.dumps({{"rank_info": info.__module__, "heavy": heavy, "mods": mods,
                  "same": distcomp.runtime is sys.modules["distcomp.runtime"],
                  "api": distcomp.run.__module__, "dir": "runtime" in dir(distcomp)}}))
""")
    assert got["rank_info"] == "distcomp.runtime._rankinfo"
    assert got["heavy"] == []  # reaching distcomp.runtime imports no mlflow
    assert got["mods"] == {name: f"distcomp.{name}" for name in PUBLIC}
    assert got["same"] is True and got["dir"] is True
    assert got["api"] == "distcomp.api"  # distcomp.run is still the function, not a module


def test_an_unknown_name_is_still_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="has no attribute 'nosuchmodule'"):
        distcomp.nosuchmodule  # noqa: B018
    with pytest.raises(AttributeError):
        distcomp._lazy_private_thing  # noqa: B018


TRAIN = '''\
import distcomp


@distcomp.component(name="bare-import", version="1.0.0", nproc_per_node=2)
def train(steps: int = 3):
    for step in range(steps):
        distcomp.runtime.log_metrics({"acc": step / 10, "loss": 1.0 / (step + 1)}, step=step)
'''


@pytest.mark.slow
def test_a_function_component_logs_through_distcomp_runtime_after_a_bare_import(tmp_path: Path,
                                                                               sqlite_uri: str) -> None:  # noqa: F811
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "train.py").write_text(TRAIN, encoding="utf-8")
    proc = distcomp_cli(tmp_path, "run", "proj/train.py:train", "-i", "steps=3", "--run-dir", str(tmp_path / "run"),
                        "--experiment", "bare-import", uri=sqlite_uri)
    assert proc.returncode == 0, explain(proc)
    assert "AttributeError" not in proc.stderr
    client = MlflowClient(sqlite_uri)
    exp = client.get_experiment_by_name("bare-import")
    assert exp is not None
    runs = client.search_runs([exp.experiment_id])
    assert len(runs) == 1 and runs[0].info.status == "FINISHED"
    run_id = runs[0].info.run_id
    assert sorted((m.step, m.value) for m in client.get_metric_history(run_id, "acc")) == [(s, s / 10) for s in range(3)]
    assert len(client.get_metric_history(run_id, "loss")) == 3  # rank 0's only
