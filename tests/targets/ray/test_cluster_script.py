"""dev/ray/cluster.sh: a start that fails after the head is up ends what it started (exit 3,
the reason said, no process of the cluster left), so a retry or another test starts clean."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from .conftest import CLUSTER, carrying


@pytest.mark.slow
def test_a_node_that_cannot_join_leaves_no_head_running(tmp_path: Path) -> None:
    # the real ray for the head; for the second node a `ray` that fails as a worker that cannot
    # join would (a firewall, a wrong address): the head it left must not outlive the start
    real = Path(sys.executable).parent / "ray"
    shim = tmp_path / "bin"
    shim.mkdir()
    (shim / "ray").write_text(f'#!/bin/sh\ncase " $* " in *" --address "*) echo "cannot join" >&2; exit 1;; esac\n'
                              f'exec {real} "$@"\n')
    (shim / "ray").chmod(0o755)
    folder = Path(tempfile.mkdtemp(prefix="dray-"))
    env = {**os.environ, "PATH": f"{shim}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    env.pop("RAY_ADDRESS", None)
    try:
        proc = subprocess.run(["bash", str(CLUSTER), "start", str(folder)], capture_output=True, text=True,
                              timeout=300, env=env)
        assert proc.returncode == 3, proc.stderr
        assert "ray start --address failed" in proc.stderr and f"{folder}/worker.log" in proc.stderr
        assert carrying(f"DISTCOMP_RAY_CLUSTER={folder}") == [], "the head outlived the failed start"
        assert not (folder / "address").exists()  # no RAY_ADDRESS of a cluster that is not there
    finally:
        subprocess.run(["bash", str(CLUSTER), "stop", str(folder)], capture_output=True, text=True, timeout=120,
                       env=env)
        shutil.rmtree(folder, ignore_errors=True)
