"""The fetch step a Slurm node runs (``fetch-into``), as the node runs it: the stdlib fetcher's
text under ``python -I -S -c`` against a real S3-compatible store (moto on 127.0.0.1, signatures
checked). Two tasks of one host (the nodes of a one-machine cluster) fetch into the same folder
at once; a parent folder another user could write is refused."""

from __future__ import annotations

import pytest
import os
import subprocess
import sys
from pathlib import Path

from distcomp.delivery.store import SOURCE, StoreURI, pack, upload_code
from tests._s3server import S3Server


def _fetch_into(s3: S3Server, *args: str) -> subprocess.Popen[str]:
    env = {"PATH": os.environ.get("PATH", ""), **s3.env()}
    return subprocess.Popen([sys.executable, "-I", "-S", "-c", SOURCE, "fetch-into", *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _code(tmp_path: Path) -> dict[str, Path]:
    src = tmp_path / "src"
    (src / "pkg").mkdir(parents=True)
    (src / "train.py").write_text("print('hi')\n")
    (src / "pkg" / "words.py").write_text("GREETING = 'hello'\n")
    return {"train.py": src / "train.py", "pkg/words.py": src / "pkg" / "words.py"}


@pytest.mark.slow
def test_two_tasks_of_one_host_fetch_one_folder_whole(s3_server: S3Server, tmp_path: Path) -> None:
    obj = upload_code(StoreURI(s3_server.bucket, f"into-{tmp_path.name}"), pack(_code(tmp_path)), s3_server.env())
    dest = tmp_path / "node" / "job-1"
    procs = [_fetch_into(s3_server, obj.bucket, obj.key, obj.sha256, str(dest)) for _ in range(2)]
    outs = [(p.wait(timeout=120), *p.communicate()) for p in procs]
    assert [rc for rc, _o, _e in outs] == [0, 0], outs
    said = sorted(out.strip() for _rc, out, _e in outs)
    assert any(line.endswith(f"2 files into {dest}") for line in said), said  # one of them fetched it
    assert all(line.endswith(f"2 files into {dest}") or line == f"{dest}: already fetched by another task on this "
               "host" for line in said), said
    assert (dest / "pkg" / "words.py").read_text() == "GREETING = 'hello'\n"
    assert sorted(p.name for p in dest.parent.iterdir()) == ["job-1"]  # no half folder beside it
    assert (dest.parent.stat().st_mode & 0o777) == 0o700


def test_a_parent_others_may_write_is_refused(s3_server: S3Server, tmp_path: Path) -> None:
    obj = upload_code(StoreURI(s3_server.bucket, f"into-{tmp_path.name}"), pack(_code(tmp_path)), s3_server.env())
    open_dir = tmp_path / "everyones"
    open_dir.mkdir()
    open_dir.chmod(0o777)
    rc, out, err = (lambda p: (p.wait(timeout=120), *p.communicate()))(
        _fetch_into(s3_server, obj.bucket, obj.key, obj.sha256, str(open_dir / "job-1")))
    assert rc == 1 and out == "" and not (open_dir / "job-1").exists()
    assert err == (f"fetch-into: {open_dir} is not a folder of this user's own that only its owner writes (a link, "
                   "another user's, or group/world-writable): remove it, or give another place\n")
