"""A record says what runs, so it is trusted as ssh trusts a key file: ``python -m distcomp.agent``
and ``python -m distcomp.worker`` refuse one that others may write or that another user owns
(exit 2, one line naming the file, its mode or owner and the fix, nothing started), the node
record's secrets file must be a file of the record's own folder, readable by its owner only;
and every record distcomp writes passes, whatever the umask."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Iterator

import pytest

from distcomp.agent import record as schema
from distcomp.core.agentboot import boot_argv
from distcomp.core.jobrecord import JobRecord, write_record
from distcomp.records import COMMAND
from distcomp.base.redact import Masker
from distcomp.targets import _secrets

PY = sys.executable
ROOT = os.geteuid() == 0
NOBODY = 65534
as_root = pytest.mark.skipif(not ROOT, reason="making a file another user owns needs root")


def _data(out: Path, **extra: Any) -> dict[str, Any]:
    """A one-node record whose replica writes OUT/ran (so "nothing ran" can be seen)."""
    return {schema.KEY: schema.VERSION, "job": "t", "nodes": 1, "cwd": str(out),
            "command": [PY, "-c", "open('ran', 'w').write('yes')"],
            "replicas": [{"name": "rank0", "role": "worker", "index": 0, "node": 0, "argv": [COMMAND]}],
            "grace": 1.0, **extra}


@pytest.fixture
def job(tmp_path: Path) -> Path:
    """The job folder (mode 700, as distcomp makes one)."""
    folder = tmp_path / "job"
    folder.mkdir(mode=0o700)
    return folder


def _write(folder: Path, data: dict[str, Any], mode: int = 0o600) -> Path:
    path = folder / "node.json"
    path.write_text(json.dumps(data))
    path.chmod(mode)
    return path


def _agent(path: Path, **kw: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PY, "-m", "distcomp.agent", str(path)], capture_output=True, text=True, timeout=60, **kw)


def _refused(proc: subprocess.CompletedProcess[str], tool: str, *said: str) -> None:
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stderr.startswith(f"distcomp {tool}: "), proc.stderr
    for part in said:
        assert part in proc.stderr, proc.stderr


def _nothing_ran(job: Path, tmp_path: Path) -> None:
    assert not (tmp_path / "ran").exists()
    assert not (job / "logs").exists() and not (job / "exits").exists()


def test_a_record_of_distcomps_mode_runs(job: Path, tmp_path: Path) -> None:
    """The control: the same record, mode 600 (or 644), runs."""
    for mode in (0o600, 0o644):
        path = _write(job, _data(tmp_path), mode)
        proc = _agent(path)
        assert proc.returncode == 0, proc.stderr
        assert (tmp_path / "ran").read_text() == "yes"
        (tmp_path / "ran").unlink()


@pytest.mark.parametrize("mode", [0o666, 0o602], ids=oct)
def test_a_world_writable_node_record_is_refused(job: Path, tmp_path: Path, mode: int) -> None:
    path = _write(job, _data(tmp_path), mode)
    proc = _agent(path)
    _refused(proc, "agent", f"the job record {path} (mode {mode:04o}, owner ", "is writable by anyone",
             f"chmod go-w {path}")
    _nothing_ran(job, tmp_path)


@as_root
def test_a_record_writable_by_a_group_not_its_owners_own_is_refused(job: Path, tmp_path: Path) -> None:
    path = _write(job, _data(tmp_path), 0o660)
    os.chown(path, -1, NOBODY)  # nogroup: not root's private group
    _refused(_agent(path), "agent", "(mode 0660", "is writable by its group", f"chmod go-w {path}")
    _nothing_ran(job, tmp_path)


@as_root
def test_a_group_writable_record_of_the_owners_private_group_runs(job: Path, tmp_path: Path) -> None:
    """A umask of 002 on a user-private-group system (as Debian's ssh accepts it): root's group
    is root's own (primary group, no other member)."""
    import grp

    if grp.getgrgid(0).gr_mem not in ([], ["root"]):
        pytest.skip("group 0 has other members here")
    path = _write(job, _data(tmp_path), 0o664)
    proc = _agent(path)
    assert proc.returncode == 0, proc.stderr


@as_root
def test_a_record_owned_by_another_user_is_refused(job: Path, tmp_path: Path) -> None:
    path = _write(job, _data(tmp_path), 0o644)
    os.chown(path, NOBODY, NOBODY)
    _refused(_agent(path), "agent", f"the job record {path} is owned by ", f"uid {NOBODY}",
             "not by you (root (uid 0)): distcomp runs only what its own user (or root) wrote")
    _nothing_ran(job, tmp_path)


def test_a_record_in_a_folder_anyone_may_change_is_refused(job: Path, tmp_path: Path) -> None:
    path = _write(job, _data(tmp_path))
    job.chmod(0o777)
    try:
        _refused(_agent(path), "agent", f"lies in {job} (mode 0777), where anyone may replace it",
                 f"chmod o-w {job}")
        _nothing_ran(job, tmp_path)
        job.chmod(0o1777)  # sticky, as /tmp: no one else may replace the user's file
        assert _agent(path).returncode == 0
    finally:
        job.chmod(0o700)


@pytest.mark.parametrize("name", ["../../../etc/shadow", "../secrets.sh", "/etc/shadow", "sub/secrets.sh", ".."])
def test_a_secrets_file_outside_the_records_folder_is_refused(job: Path, tmp_path: Path, name: str) -> None:
    path = _write(job, _data(tmp_path, secrets=name, env={"X": ["a", 0]}))
    _refused(_agent(path), "agent", "'secrets' must be the name of a file in the record's own folder",
             repr(name))
    _nothing_ran(job, tmp_path)


def _secret_file(folder: Path, mode: int = 0o600) -> Path:
    path = folder / _secrets.NAME
    _secrets.write(path, Masker.of({"password": "hunter22"}))
    path.chmod(mode)
    return path


def test_a_secrets_file_that_is_a_link_out_of_the_folder_is_refused(job: Path, tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir(mode=0o700)
    target = _secret_file(outside)
    (job / _secrets.NAME).symlink_to(target)
    path = _write(job, _data(tmp_path, secrets=_secrets.NAME, env={"X": ["a", 0]}))
    _refused(_agent(path), "agent", f"the job's secrets file {job / _secrets.NAME} is a symbolic link")
    _nothing_ran(job, tmp_path)


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604], ids=oct)
def test_a_secrets_file_others_may_read_is_refused(job: Path, tmp_path: Path, mode: int) -> None:
    secrets = _secret_file(job, mode)
    path = _write(job, _data(tmp_path, secrets=_secrets.NAME, env={"X": ["a", 0]}))
    _refused(_agent(path), "agent", f"the job's secrets file {secrets} (mode {mode:04o}", "is open to others",
             f"chmod 600 {secrets}")
    _nothing_ran(job, tmp_path)
    secrets.chmod(0o600)  # as distcomp writes it: it runs
    assert _agent(path).returncode == 0


# -- python -m distcomp.worker --
def _worker(path: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PY, "-m", "distcomp.worker", str(path)], cwd=cwd, capture_output=True, text=True,
                          timeout=60)


def _job_record(tmp_path: Path) -> Path:
    # a run record whose spec does not exist: were it trusted, the worker would say so (exit 2 too)
    return write_record(tmp_path / "job.json", JobRecord("run", str(tmp_path / "nope.yaml"), str(tmp_path),
                                                         options={"run_dir": str(tmp_path / "run")}))


@pytest.mark.parametrize("mode", [0o666, 0o646], ids=oct)
def test_the_worker_refuses_a_world_writable_record(tmp_path: Path, mode: int) -> None:
    path = _job_record(tmp_path)
    path.chmod(mode)
    _refused(_worker(path, tmp_path), "worker", f"the job record {path} (mode {mode:04o}", "is writable by anyone",
             f"chmod go-w {path}")
    assert not (tmp_path / "run").exists()


@as_root
def test_the_worker_refuses_a_record_of_another_user(tmp_path: Path) -> None:
    path = _job_record(tmp_path)
    os.chown(path, NOBODY, NOBODY)
    _refused(_worker(path, tmp_path), "worker", f"the job record {path} is owned by ", f"uid {NOBODY}")
    assert not (tmp_path / "run").exists()


# -- distcomp's own writers pass, whatever the umask --
@pytest.fixture
def umask_000() -> Iterator[None]:
    old = os.umask(0)
    try:
        yield
    finally:
        os.umask(old)


def test_a_job_record_is_written_mode_600_under_any_umask(tmp_path: Path, umask_000: None) -> None:
    path = _job_record(tmp_path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    proc = _worker(path, tmp_path)
    assert "nope.yaml" in proc.stderr and "job record" not in proc.stderr, proc.stderr  # read, then refused on its spec


def test_a_booted_agent_writes_its_record_mode_600_under_any_umask(tmp_path: Path, umask_000: None) -> None:
    """A pod (Kubernetes, Azure ML) whose image sets umask 000: the agent it boots still trusts the
    record the boot line wrote."""
    argv = boot_argv(_data(tmp_path), python=PY)
    proc = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "ran").read_text() == "yes"


def test_the_slurm_script_writes_its_node_record_writable_by_its_owner_only(tmp_path: Path) -> None:
    """sbatch runs the script under the submitter's umask (002 on many systems, 000 here): the
    script's own lines write the record, then take group and world write away before any agent
    reads it."""
    import distcomp

    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "train.py").write_text("print('hi')\n")
    spec = tmp_path / "code" / "component.yaml"
    spec.write_text("name: t\ntype: DistributedComponent\nlauncher:\n  type: torch.distributed\n"
                    "  additional_arguments: python train.py\n")
    lines = distcomp.compile(str(spec), "slurm").text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith('cat >"$DISTCOMP_JOB_FOLDER/node.json"'))
    end = next(i for i, line in enumerate(lines) if i > start and line.startswith("DISTCOMP_NODE_RECORD"))
    tail = [line for line in lines[end + 1:end + 3] if not line.startswith("#")]
    folder = tmp_path / "job"
    folder.mkdir(mode=0o700)
    snippet = "\n".join(lines[start:end + 1] + tail[:1])
    done = subprocess.run(["bash", "-c", "umask 000\n" + snippet], env={**os.environ, "DISTCOMP_JOB_FOLDER": str(folder)},
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert stat.S_IMODE((folder / "node.json").stat().st_mode) & 0o022 == 0
    assert schema.read(str(folder / "node.json"))["job"]


@as_root
def test_a_root_owned_record_runs_for_another_user_as_a_configmap_mounts_it(tmp_path: Path) -> None:
    """Kubernetes mounts a ConfigMap's files owned by root, mode 644, into a pod that may run as
    any uid: the agent (alone, as the boot line unpacks it) accepts a record root owns."""
    python = shutil.which("python3", path="/usr/bin:/usr/local/bin:/bin")
    if python is None:
        pytest.skip("no python3 that another user may run")
    import base64
    import io
    import zipfile

    from distcomp.core.agentboot import agent_payload

    top = Path(tempfile.mkdtemp(prefix="distcomp-cm-"))
    try:
        top.chmod(0o755)
        zipfile.ZipFile(io.BytesIO(base64.b64decode(agent_payload()))).extractall(top / "lib")
        for p in (top / "lib").rglob("*"):
            p.chmod(0o755 if p.is_dir() else 0o644)
        mounted, out = top / "config", top / "out"
        mounted.mkdir(mode=0o755)
        out.mkdir()
        os.chown(out, NOBODY, NOBODY)
        # root's, as the kubelet writes it; the agent's reports go where the pod may write
        path = _write(mounted, _data(out, logs=str(out / "logs"), exits=str(out / "exits"),
                                     command=[python, "-c", "open('ran', 'w').write('yes')"]), 0o644)

        def agent() -> subprocess.CompletedProcess[str]:
            return subprocess.run([python, "-I", "-c", "import runpy, sys; sys.path.insert(0, sys.argv[1]); "
                                   "sys.argv = ['agent', sys.argv[2]]; runpy.run_module('distcomp.agent', "
                                   "run_name='__main__')", str(top / "lib"), str(path)],
                                  cwd=out, user=NOBODY, group=NOBODY, extra_groups=[], capture_output=True, text=True,
                                  timeout=60, env={"PATH": "/usr/bin:/bin"})

        proc = agent()
        assert proc.returncode == 0, proc.stderr
        assert (out / "ran").read_text() == "yes"
        os.chmod(path, 0o666)  # but not one anyone may change
        proc = agent()
        assert proc.returncode == 2 and "is writable by anyone" in proc.stderr, proc.stderr
    finally:
        shutil.rmtree(top, ignore_errors=True)
