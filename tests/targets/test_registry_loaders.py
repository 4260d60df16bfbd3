"""Every loader takes a registry reference (and a folder) as well as a spec file: `distcomp run`,
`distcomp compile` for each target, `distcomp.kfp.load_component`, `distcomp.azureml.load_component`."""

from __future__ import annotations

import json
import os
import py_compile
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from distcomp.registry import RegistryError, locate, open_registry
from distcomp.spec import load
from .kubeflow._scratch import job_doc

REPO = Path(__file__).resolve().parents[2]
COMPONENT = REPO / "components" / "pytorch-ddp-train"
QUICK = ["--input", "epochs=1", "--input", "samples=128"]
# azure-ai-ml (on marshmallow 3) warns about its own use of marshmallow APIs hundreds of times
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore:.*:UserWarning:marshmallow")


@pytest.fixture
def registry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "registry"
    published = open_registry(str(root)).publish(COMPONENT / "component.yaml")
    assert published.created and published.name == "pytorch-ddp-train"
    monkeypatch.setenv("DISTCOMP_REGISTRY", str(root))
    return root


def distcomp(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "MLFLOW_TRACKING_URI": f"sqlite:///{cwd / 'mlflow.db'}", **(env or {})}
    return subprocess.run([sys.executable, "-m", "distcomp", *args], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=180)


def test_locate_resolves_references_folders_and_files(registry: Path) -> None:
    stored = locate("pytorch-ddp-train@latest")
    assert stored.is_relative_to(registry) and stored.name == "component.yaml"
    assert locate("pytorch-ddp-train@^1") == locate("pytorch-ddp-train@>=1.0,<2") == stored
    assert locate(str(COMPONENT)) == COMPONENT / "component.yaml"
    assert locate(str(COMPONENT / "component.yaml")) == COMPONENT / "component.yaml"
    spec = load(stored)
    assert (spec.code / "train.py").read_bytes() == (COMPONENT / "train.py").read_bytes()
    with pytest.raises(RegistryError, match="pytorch-ddp-train"):
        locate("pytorch-ddp-train@^2")


@pytest.mark.slow
def test_run_a_reference_for_real(registry: Path, tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    proc = distcomp("run", "pytorch-ddp-train@latest", *QUICK, "--run-dir", "run", cwd=work)
    assert proc.returncode == 0, proc.stderr
    status = json.loads((work / "run" / "status.json").read_text())
    assert status["state"] == "succeeded"
    assert (work / "run" / "outputs" / "model" / "model.pt").is_file()  # outputs land here, not in the registry
    # the registry copy is untouched: it still verifies
    assert locate("pytorch-ddp-train@1.0.0").is_file()


@pytest.mark.slow
def test_run_a_folder(tmp_path: Path) -> None:
    proc = distcomp("run", str(COMPONENT), *QUICK, "--no-tracking", "--run-dir", "run", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.slow
def test_compile_every_target_from_a_reference(registry: Path, tmp_path: Path) -> None:
    ref = "pytorch-ddp-train@^1.0"
    kube = distcomp("compile", "--target", "kubeflow", ref, "--nodes", "2", "--volume", "results:/results", cwd=tmp_path)
    assert kube.returncode == 0, kube.stderr
    assert job_doc(kube.stdout)["kind"] == "PyTorchJob"
    azure = distcomp("compile", "--target", "azureml", ref, "--out", "az/component.yml", cwd=tmp_path)
    assert azure.returncode == 0, azure.stderr
    assert yaml.safe_load((tmp_path / "az/component.yml").read_text())["name"] == "pytorch_ddp_train"
    kfp = distcomp("compile", "--target", "kfp", ref, "--out", "kfp.yaml", cwd=tmp_path)
    assert kfp.returncode == 0, kfp.stderr
    mlflow = distcomp("compile", "--target", "mlflow", ref, "--out", "project", cwd=tmp_path)
    assert mlflow.returncode == 0, mlflow.stderr
    assert (tmp_path / "project" / "train.py").read_bytes() == (COMPONENT / "train.py").read_bytes()
    # the project is the user's to change and to compile over again, even if the registry's copy is read-only
    assert (tmp_path / "project" / "train.py").stat().st_mode & stat.S_IWUSR
    again = distcomp("compile", "--target", "mlflow", ref, "--out", "project", cwd=tmp_path)
    assert again.returncode == 0, again.stderr


def test_python_loaders_take_a_reference(registry: Path) -> None:
    from distcomp import azureml, kfp

    component = kfp.load_component("pytorch-ddp-train@1.0.0")
    assert component.name == "pytorch-ddp-train"
    assert "epochs" in component.component_spec.inputs
    azure = azureml.load_component("pytorch-ddp-train@latest", nodes=2)
    assert azure.resources.instance_count == 2 and "epochs" in azure.inputs


def test_unknown_reference_is_a_clear_error(registry: Path, tmp_path: Path) -> None:
    proc = distcomp("run", "no-such-component@latest", cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "no-such-component" in proc.stderr
    compiled = distcomp("compile", "--target", "azureml", "pytorch-ddp-train@9.9.9", cwd=tmp_path)
    assert compiled.returncode == 2 and "Traceback" not in compiled.stderr and "9.9.9" in compiled.stderr


def test_a_tampered_component_is_refused_by_every_loader(registry: Path, tmp_path: Path) -> None:
    stored = locate("pytorch-ddp-train@1.0.0")
    script = stored.parent / "train.py"
    script.chmod(script.stat().st_mode | stat.S_IWUSR)
    script.write_text(script.read_text() + "\nimport os; os.system('echo pwned')\n")
    run = distcomp("run", "pytorch-ddp-train@1.0.0", *QUICK, cwd=tmp_path)
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert "hash" in run.stderr and "train.py" in run.stderr
    assert not (tmp_path / "runs").exists()  # refused before anything started
    from distcomp import azureml

    with pytest.raises(azureml.AzureMLTargetError, match="hash"):
        azureml.load_component("pytorch-ddp-train@latest")


def test_a_deprecated_version_named_exactly_loads_with_a_one_line_warning(registry: Path, tmp_path: Path) -> None:
    open_registry(str(registry)).deprecate("pytorch-ddp-train@1.0.0", "use 2.0.0")
    proc = distcomp("render", "pytorch-ddp-train@1.0.0", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == "distcomp: warning: pytorch-ddp-train@1.0.0 is deprecated: use 2.0.0\n"
    assert proc.stdout.startswith("python train.py ")
    latest = distcomp("render", "pytorch-ddp-train@latest", cwd=tmp_path)  # latest skips it: nothing left
    assert latest.returncode == 2 and "deprecated" in latest.stderr and "Traceback" not in latest.stderr


# A component whose rank imports a module of its code folder, and says which code it ran.
WHO = {
    "component.yaml": "name: who\nversion: 1.0.0\ntype: DistributedComponent\noutputs:\n  result:\n"
                      "    type: AnyDirectory\nlauncher:\n  type: torch.distributed\n"
                      "  additional_arguments: python run.py {outputs.result}\ncode: .\n",
    "run.py": "import pathlib, sys\nimport helper\npathlib.Path(sys.argv[1], 'who.txt').write_text(helper.WHO)\n",
    "helper.py": "WHO = 'source'\n",
}


@pytest.fixture
def who(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``who@1.0.0`` published in a registry of its own ($DISTCOMP_REGISTRY); its stored folder."""
    src = tmp_path / "who"
    src.mkdir()
    for name, text in WHO.items():
        (src / name).write_text(text)
    root = tmp_path / "registry"
    monkeypatch.setenv("DISTCOMP_REGISTRY", str(root))
    return Path(open_registry(str(root)).publish(src).location)


def plant_bytecode(stored: Path, tmp_path: Path) -> Path:
    """Bytecode of another helper.py where Python looks first; 'unchecked' so no source date or
    size can make Python pass it over: only not looking there does."""
    stored.chmod(0o755)  # a registry user who can write there (root can anyway)
    evil = tmp_path / "evil_helper.py"
    evil.write_text("WHO = 'planted'\n")
    pyc = stored / "__pycache__" / f"helper.{sys.implementation.cache_tag}.pyc"
    py_compile.compile(str(evil), cfile=str(pyc), doraise=True,
                       invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)
    check = subprocess.run([sys.executable, "-c", "import helper; print(helper.WHO)"], cwd=stored, text=True,
                           capture_output=True, env={k: v for k, v in os.environ.items() if k != "PYTHONPYCACHEPREFIX"})
    assert check.stdout == "planted\n", check.stderr  # what a plain Python in that folder would run
    return pyc


def test_planted_bytecode_is_refused_before_anything_starts(who: Path, tmp_path: Path) -> None:
    pyc = plant_bytecode(who, tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    added = f"{pyc.relative_to(who)} was added"
    for spec in ("who@1.0.0", "who@latest", str(who), str(who / "component.yaml")):  # by reference or by path
        proc = distcomp("run", spec, "--run-dir", "run", cwd=work)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
        assert f"stored who@1.0.0 at {who} does not match its content hash: {added}" in proc.stderr
        assert list(work.iterdir()) == []  # no run folder, no MLflow store: nothing was created


def test_ranks_of_a_registry_job_never_read_stored_bytecode(who: Path, tmp_path: Path) -> None:
    """Verification bypassed (the library's load() takes a file as it is): the rank still runs the
    hashed source, because its Python keeps bytecode in the per-user cache, not beside the code."""
    from distcomp.core.plugins import get_plugin_manager
    from distcomp.targets.local import RunOptions, run_topology

    plant_bytecode(who, tmp_path)
    spec = load(who / "component.yaml")
    topology = get_plugin_manager().launcher(spec.distribution.launcher).type.factory(spec)
    out = tmp_path / "out"
    out.mkdir()
    result = run_topology(spec, topology, {}, {"result": str(out)}, RunOptions(tmp_path / "run", echo=False))
    assert result.state == "succeeded", result
    assert (out / "who.txt").read_text() == "source"


def test_a_registry_job_writes_no_bytecode_into_the_registry(who: Path, tmp_path: Path) -> None:
    """Run as root (CI, containers), Python writes __pycache__ through read-only modes: a job
    would change the stored version it runs. Its ranks run in a copy in the run folder: the
    bytecode goes there, and is removed with the copy."""
    work, cache = tmp_path / "work", tmp_path / "cache"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")}
    proc = subprocess.run([sys.executable, "-m", "distcomp", "run", "who@1.0.0", "--no-tracking", "--run-dir", "run"],
                          capture_output=True, text=True, cwd=work, timeout=180,
                          env={**env, "XDG_CACHE_HOME": str(cache)})
    assert proc.returncode == 0, proc.stderr
    assert (work / "run" / "outputs" / "result" / "who.txt").read_text() == "source"
    assert not (who / "__pycache__").exists()
    assert not (work / "run" / "work").exists()  # the copy, its bytecode included, is gone
    # no bytecode of a copy piles up in the user's cache (what is there: distcomp's own start caches,
    # the entry points, its records' generated methods and the spec's parse)
    assert not (cache / "distcomp").exists() or {p.name for p in (cache / "distcomp").iterdir()} <= {
        "entry-points", "dataclasses", "yaml"}
    assert locate("who@1.0.0").parent == who  # still verifies
