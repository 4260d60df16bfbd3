"""The node agent shares its small helpers with the core through one stdlib-only module
(``distcomp.agent.shared``), not copies, and still travels alone: in the boot line's payload (a
pod, an Azure ML instance) and in the Ray job's package, it runs under ``python -I -S``."""

from __future__ import annotations

import ast
import base64
import io
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import distcomp
import distcomp.agent
from distcomp import records
from distcomp.base import files as _files
from distcomp.base import redact
from distcomp.agent import record as schema
from distcomp.agent import shared

AGENT = Path(distcomp.agent.__file__).parent
PACKAGE = Path(distcomp.__file__).parent
PY = sys.executable


def _imports(path: Path) -> list[tuple[int, str, int]]:
    """(level, module, line) of every import in ``path`` (level 0: absolute)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(0, a.name, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            found.append((node.level, node.module or "", node.lineno))
    return found


def test_the_agent_imports_only_the_standard_library_and_itself() -> None:
    """Every module of the agent package (its rank watcher's ``_ranksite`` too), inside functions
    as well: absolute imports of the standard library, relative ones within the package; and
    ``shared`` (with the package's ``__init__``, which importing it runs) imports nothing of the
    agent either, so the core that imports it loads nothing else."""
    modules = sorted(p for p in AGENT.rglob("*.py") if "__pycache__" not in p.parts)
    assert AGENT / "shared.py" in modules
    bad = []
    for path in modules:
        where = path.relative_to(AGENT)
        for level, module, line in _imports(path):
            if level == 0 and module.split(".")[0] not in sys.stdlib_module_names:
                bad.append(f"{where}:{line}: {module} is not in the standard library")
            elif level and (level > 1 or path.parent != AGENT):
                bad.append(f"{where}:{line}: a relative import that leaves the agent package")
            elif level and path.name in ("shared.py", "__init__.py"):
                bad.append(f"{where}:{line}: imports another module of the agent")
    assert bad == []


# each helper's body, as any copy of it would spell it
_COPIES = {
    "the placeholder pattern": "job_dir|job_id|restart|max_restarts",
    "the masking rule's short-secret guard": "(?<![^\\s='\\\"])",
    "an atomic writer": "def write_atomic(",
    "an atomic writer of the agent": "def _write_atomic(",
    "a mask pattern builder": "re.escape(n) if len(n) >=",
}


def test_each_helper_has_one_copy_and_the_core_imports_the_agents() -> None:
    found = {what: sorted(str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py")
                          if "__pycache__" not in p.parts and text in p.read_text(encoding="utf-8"))
             for what, text in _COPIES.items()}
    assert found == {"the placeholder pattern": ["agent/shared.py"],
                     "the masking rule's short-secret guard": ["agent/shared.py"],
                     "an atomic writer": ["agent/shared.py"], "an atomic writer of the agent": [],
                     "a mask pattern builder": ["agent/shared.py"]}
    assert records._PLACEHOLDER is schema.PLACEHOLDER is shared.PLACEHOLDER
    assert records.COMMAND is schema.COMMAND is shared.COMMAND
    assert _files.write_atomic is shared.write_atomic and _files.fsync_dir is shared.fsync_dir
    assert redact.REDACTED is shared.REDACTED


def test_both_sides_bind_and_mask_alike_each_with_its_own_error() -> None:
    values = {"host:0": "10.0.0.1", "port:master": "29500", "job_dir": "/j"}
    line = "{{host:0}}:{{port:master}} in {{job_dir}}, {{ not a placeholder }}"
    assert records.bind(line, values) == schema.bind(line, values) == "10.0.0.1:29500 in /j, {{ not a placeholder }}"
    with pytest.raises(records.PlaceholderError, match=r"no value for placeholder \{\{node:1\}\}"):
        records.bind("{{node:1}}", values)
    with pytest.raises(schema.RecordError, match=r"no value for placeholder \{\{node:1\}\}"):
        schema.bind("{{node:1}}", values)
    masker = redact.Masker.of({"password": "hunter2", "passwd": "ab"})
    from distcomp.agent._node import _Masker

    agent = _Masker(masker.needles)
    for text in ("--password hunter2 --pw=ab about a lab", "'ab' and hunter22"):
        assert agent(text) == masker.text(text)
    assert masker.text("--pw ab hunter2") == "--pw *** ***"


def test_write_atomic_takes_a_path_or_text_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    shared.write_atomic(str(tmp_path / "a" / "x.json"), "1\n")
    _files.write_atomic(tmp_path / "a" / "x.json", "2\n", durable=True, mode=0o600)
    assert (tmp_path / "a" / "x.json").read_text() == "2\n"
    assert (tmp_path / "a" / "x.json").stat().st_mode & 0o777 == 0o600
    with pytest.raises(IsADirectoryError):
        shared.write_atomic(tmp_path / "a", "3\n")
    assert sorted(os.listdir(tmp_path / "a")) == ["x.json"]


def _job(tmp_path: Path) -> Path:
    """A node record whose one replica prints a secret and fails, with a file to bind: it goes
    through each shared helper (bind, the masking rule, write_atomic) in the agent."""
    job = tmp_path / "job"
    job.mkdir()
    fd = os.open(job / "secrets.sh", os.O_WRONLY | os.O_CREAT, 0o600)
    os.write(fd, b"DISTCOMP_SECRET_0=hunter22\n")
    os.close(fd)
    say = "import sys; print('the password is', sys.argv[1], flush=True); sys.exit(3)"
    data = {schema.KEY: schema.VERSION, "job": "t", "nodes": 1, "cwd": str(tmp_path), "secrets": "secrets.sh",
            "command": [PY, "-c", say, [0]], "files": {"where": "{{job_id}} in {{job_dir}}\n"},
            "replicas": [{"name": "rank0", "role": "worker", "index": 0, "node": 0, "argv": [schema.COMMAND]}]}
    path = job / "node.json"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    os.write(fd, json.dumps(data).encode())
    os.close(fd)
    return path


def _run_alone(top: Path, package: str, record: Path) -> None:
    """The agent as ``package`` under ``top``, and nothing else: no site-packages, no PYTHONPATH."""
    start = ("import runpy, sys; sys.path.insert(0, sys.argv.pop(1)); package = sys.argv.pop(1); "
             "runpy.run_module(package, run_name='__main__', alter_sys=True)")
    proc = subprocess.run([PY, "-I", "-S", "-c", start, str(top), package, str(record)], capture_output=True,
                          text=True, env={"PATH": os.environ["PATH"]}, timeout=60)
    assert proc.returncode == 1, proc.stderr
    assert "hunter22" not in proc.stderr + proc.stdout
    report = json.loads((record.parent / "exits" / "rank0.json").read_text())
    assert (report["exit_code"], report["tail"]) == (3, ["the password is ***"])
    assert (record.parent / "where").read_text() == f"t in {record.parent}\n"
    assert sorted(os.listdir(record.parent / "exits")) == ["rank0.json"]


def test_the_boot_lines_agent_carries_the_shared_module_and_runs_alone(tmp_path: Path) -> None:
    """What a pod or an Azure ML instance unpacks (``agentboot.agent_payload``)."""
    from distcomp.core.agentboot import agent_payload

    with zipfile.ZipFile(io.BytesIO(base64.b64decode(agent_payload()))) as z:
        assert "distcomp/agent/shared.py" in z.namelist()
        z.extractall(tmp_path / "lib")
    _run_alone(tmp_path / "lib", "distcomp.agent", _job(tmp_path))


def test_the_ray_jobs_package_carries_the_shared_module_and_runs_alone(tmp_path: Path) -> None:
    """What a Ray job uploads (``runtime_env.py_modules``): the agent's files as ``distcomp_ray``."""
    from distcomp.targets.ray._compile import PACKAGE as RAY_PACKAGE
    from distcomp.targets.ray._stage import stage

    package = stage(tmp_path / "staged", {}, redact.NONE)
    assert (package / "shared.py").read_bytes() == (AGENT / "shared.py").read_bytes()
    _run_alone(package.parent, RAY_PACKAGE, _job(tmp_path))
