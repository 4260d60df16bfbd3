"""Real public Azure ML specs, judged by azure-ai-ml and by distcomp, and compiled to Kubeflow.

tests/reference/azureml-public/MANIFEST.yaml lists every spec of the public corpus (its file
under tests/reference/, its origin, azure's and distcomp's verdicts, a reason wherever they
differ, and whether the Kubeflow target compiles it) and the pass rates those verdicts give.
Every entry must still hold exactly as recorded (a stale one fails), and every spec file
under azureml-public/ must be listed.

Azure judges a copy of the corpus in which the folders and files a spec points at and that
were not copied in (``code: src``, a ``build:`` context, a Dockerfile) exist, empty: the
verdict is then about the spec, not about a source tree left behind (azure's LocalPathField
refuses a path that does not exist; distcomp only warns about a missing code folder). It runs
in one subprocess, as in test_azure_differential.py, with the Component SDK enabled.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

import distcomp
from distcomp.errors import DistcompError
from distcomp.spec import ComponentSpec, check_file, is_uri
from tests.conftest import REFERENCE
from tests.spec.test_azure_differential import AZURE_JUDGE, azure_loader

CORPUS = REFERENCE / "azureml-public"
MANIFEST = CORPUS / "MANIFEST.yaml"
DATA_FILES = {"MANIFEST.yaml", "conda.yaml", "conda.yml", "env.yml"}  # beside the specs, not specs
VERDICTS = ("valid", "invalid")


@dataclass(frozen=True)
class Entry:
    file: str  # relative to tests/reference/
    origin: str
    distributed: bool
    azure: str
    distcomp: str
    why: str | None
    kubeflow: str | None  # ok, fails, or None when distcomp does not load it
    kubeflow_why: str | None

    @property
    def path(self) -> Path:
        return REFERENCE / self.file


def _read() -> tuple[dict[str, Any], list[Entry]]:
    data = yaml.safe_load(MANIFEST.read_text(encoding="utf-8"))
    entries = [Entry(e["file"], e["origin"], bool(e.get("distributed", True)), e["azure"], e["distcomp"],
                     e.get("why"), e.get("kubeflow"), e.get("kubeflow_why")) for e in data["specs"]]
    return data, entries


HEAD, ENTRIES = _read()


def test_manifest_is_whole_and_consistent() -> None:
    listed = [e.file for e in ENTRIES]
    assert len(listed) == len(set(listed)), "a spec is listed twice"
    on_disk = sorted(p.relative_to(REFERENCE).as_posix() for p in CORPUS.rglob("*.y*ml") if p.name not in DATA_FILES)
    assert not sorted(set(on_disk) - set(listed)), "spec files under azureml-public/ that MANIFEST.yaml does not list"
    for e in ENTRIES:
        assert e.path.is_file(), e.file
        assert e.azure in VERDICTS + ("crash",) and e.distcomp in VERDICTS, e.file
        assert (e.azure != e.distcomp) == bool(e.why), f"{e.file}: a reason is needed exactly where the verdicts differ"
        assert (e.kubeflow is not None) == (e.distcomp == "valid" and e.distributed), e.file
        assert (e.kubeflow == "fails") == bool(e.kubeflow_why), e.file


@pytest.fixture(scope="module")
def judged(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[str, str]]:
    """file -> (azure's verdict, its messages), on a copy whose referenced paths exist."""
    root = tmp_path_factory.mktemp("public")
    for e in ENTRIES:
        target = root / e.file
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(e.path, target)
        _make_referenced_paths(target)
    for data in (p for p in CORPUS.rglob("*") if p.is_file() and p.name in DATA_FILES - {"MANIFEST.yaml"}):
        (root / data.relative_to(REFERENCE)).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(data, root / data.relative_to(REFERENCE))
    out = root / "verdicts.json"
    jobs = [(str(root / e.file), azure_loader(root / e.file)) for e in ENTRIES]
    env = {**os.environ, "AZURE_ML_INTERNAL_COMPONENTS_ENABLED": "true"}
    proc = subprocess.run([sys.executable, "-c", AZURE_JUDGE, str(out)], input=json.dumps(jobs), env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"azure-ai-ml subprocess failed:\n{proc.stderr[-4000:]}"
    verdicts = json.loads(out.read_text())
    return {e.file: tuple(verdicts[str(root / e.file)]) for e in ENTRIES}  # type: ignore[misc]


def _make_referenced_paths(spec: Path) -> None:
    """Create, empty, the code folder and Docker build context a spec names, if not copied in."""
    try:
        data = yaml.safe_load(spec.read_text(encoding="utf-8"))
    except yaml.YAMLError:
        return
    if not isinstance(data, dict):
        return
    code = data.get("code")
    if isinstance(code, str) and not is_uri(code):
        (spec.parent / code).mkdir(parents=True, exist_ok=True)
    env = data.get("environment") if isinstance(data.get("environment"), dict) else {}
    build = env.get("build") if isinstance(env.get("build"), dict) else {}
    if isinstance(build.get("path"), str) and not is_uri(build["path"]):
        context = spec.parent / build["path"]
        context.mkdir(parents=True, exist_ok=True)
        (context / build.get("dockerfile_path", "Dockerfile")).touch()
    docker = env.get("docker") if isinstance(env.get("docker"), dict) else {}
    dockerfile = (docker.get("build") or {}).get("dockerfile") if isinstance(docker.get("build"), dict) else None
    if isinstance(dockerfile, str):
        local = spec.parent / dockerfile.removeprefix("file:")
        local.parent.mkdir(parents=True, exist_ok=True)
        local.touch()


def _ours(e: Entry) -> tuple[str, Any]:
    result = check_file(e.path)
    return ("valid" if result.spec is not None else "invalid"), result


@pytest.mark.slow
@pytest.mark.parametrize("entry", ENTRIES, ids=lambda e: e.file)
def test_verdicts_are_as_recorded(entry: Entry, judged: dict[str, tuple[str, str]]) -> None:
    theirs, detail = judged[entry.file]
    ours, result = _ours(entry)
    assert (theirs, ours) == (entry.azure, entry.distcomp), (
        f"{entry.file} ({entry.origin}): recorded azure={entry.azure} distcomp={entry.distcomp}"
        f"{' (' + entry.why + ')' if entry.why else ''}; now azure={theirs} distcomp={ours}\n"
        f"azure: {detail[:2000]}\ndistcomp: {[str(d) for d in result.errors]}")
    assert all("Traceback" not in str(d) for d in result.diagnostics)


def kubeflow_inputs(spec: ComponentSpec) -> dict[str, str]:
    """What a user gives the pods: a path for each port (a URI default is none in a pod) and a
    value for each required parameter without a default."""
    samples = {"integer": "1", "number": "0.5", "boolean": "true", "string": "x"}
    out = {}
    for name, inp in spec.inputs.items():
        if inp.is_port and (inp.default is None or is_uri(str(inp.default))):
            out[name] = f"/data/{name}"
        elif not inp.is_port and inp.default is None and not inp.optional:
            out[name] = inp.enum[0] if inp.enum else samples.get(inp.type, "x")
    return out


def kubeflow_compiles(e: Entry) -> tuple[bool, str]:
    spec = check_file(e.path).spec
    assert spec is not None
    try:
        distcomp.compile(spec, "kubeflow", image="registry.example/train:1", inputs=kubeflow_inputs(spec),
                         volumes={"data": "/data"})  # outputs on a PersistentVolumeClaim, as they must be
    except DistcompError as exc:
        return False, str(exc)
    return True, ""


@pytest.mark.parametrize("entry", [e for e in ENTRIES if e.kubeflow], ids=lambda e: e.file)
def test_kubeflow_compiles_as_recorded(entry: Entry) -> None:
    ok, error = kubeflow_compiles(entry)
    assert ("ok" if ok else "fails") == entry.kubeflow, (
        f"{entry.file}: recorded kubeflow={entry.kubeflow} ({entry.kubeflow_why}); now {error or 'it compiles'}")


def test_recorded_rates_are_the_verdicts() -> None:
    """The rates in MANIFEST.yaml (quoted in the README and reports) are what the entries say."""
    distributed = [e for e in ENTRIES if e.distributed]
    valid = [e for e in distributed if e.distcomp == "valid"]
    compiled = [e for e in valid if e.kubeflow == "ok"]
    agree = [e for e in ENTRIES if e.azure == e.distcomp]
    assert HEAD["rates"] == {
        "validate": f"{len(valid)} of {len(distributed)} distributed specs",
        "kubeflow": f"{len(compiled)} of {len(valid)} valid distributed specs",
        "agreement with azure-ai-ml": f"{len(agree)} of {len(ENTRIES)} specs",
    }
