"""`distcomp logs ray:ID --follow`: the job's log streamed from its beginning as the driver
writes it (the Jobs API's websocket), whole lines only, until the job has ended."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from distcomp.targets.ray import _joblog

from .conftest import TORCH, distcomp, ray_env


def test_chunks_cut_anywhere_become_whole_lines() -> None:
    chunks = ["[rank0] a", "ll good\n[rank1] x\n", "", "[ra", "nk0] done\nDISTCOMP_RAY_OUTCOME {}"]
    assert list(_joblog.lines(chunks)) == ["[rank0] all good", "[rank1] x", "[rank0] done", "DISTCOMP_RAY_OUTCOME {}"]
    assert list(_joblog.lines(["a\n", "\n"])) == ["a", ""]


@pytest.mark.slow
def test_follow_streams_a_running_job_until_it_ends(ray_cluster: str, tmp_path: Path) -> None:
    env = ray_env(ray_cluster, tmp_path)
    out = tmp_path / "out"
    proc = distcomp(env, "submit", str(TORCH), "--target", "ray", "--nodes", "2", "--output", f"result={out}",
                    "-i", "sleep=4", "--detach", "--no-tracking", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    job = proc.stdout.strip()
    # both at once, while the job runs: the whole log, and rank 1's lines alone
    whole = subprocess.Popen([sys.executable, "-m", "distcomp", "logs", job, "--follow"], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    one = distcomp(env, "logs", job, "--rank", "1", "--follow")
    said, err = whole.communicate(timeout=300)
    assert whole.returncode == 0 and one.returncode == 0, err + one.stderr
    # it returned when the job had ended: the driver's last word is the last line
    assert json.loads(distcomp(env, "status", job, "--json").stdout)["state"] == "succeeded"
    lines = said.splitlines()
    assert lines[-1].startswith("DISTCOMP_RAY_OUTCOME ") and '"state": "succeeded"' in lines[-1], said
    assert any(line.startswith("[rank0] rank 0 of 2 on ") for line in lines), said
    assert one.stdout.startswith("rank 1 of 2 on ") and "[rank" not in one.stdout, one.stdout
    assert one.stdout.splitlines() == [line.removeprefix("[rank1] ") for line in lines if line.startswith("[rank1] ")]


@pytest.mark.slow
def test_a_running_rank_that_printed_nothing_has_no_lines_yet_not_an_error(ray_cluster: str, tmp_path: Path) -> None:
    """`logs --rank 1` of a rank that runs and has said nothing: nothing, exit 0; a rank the job
    does not have: a clear error, exit 2."""
    import time

    spec = tmp_path / "quiet.yaml"
    spec.write_text(
        "name: quiet\ntype: DistributedComponent\nlauncher:\n  type: torch.distributed\n  node_count: 2\n"
        "  process_count_per_node: 1\n  additional_arguments: >-\n    python -c \"import os, time; "
        "print('rank0 here', flush=True) if os.environ['RANK'] == '0' else None; time.sleep(60)\"\n")
    env = ray_env(ray_cluster, tmp_path)
    proc = distcomp(env, "submit", str(spec), "--target", "ray", "--detach", "--no-tracking", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    job = proc.stdout.strip()
    try:
        deadline = time.monotonic() + 120
        while "rank0 here" not in distcomp(env, "logs", job, "--rank", "0").stdout:
            assert time.monotonic() < deadline, distcomp(env, "logs", job).stdout
            time.sleep(0.5)
        silent = distcomp(env, "logs", job, "--rank", "1")
        assert (silent.returncode, silent.stdout, silent.stderr) == (0, "", ""), silent
        beyond = distcomp(env, "logs", job, "--rank", "5")
        assert beyond.returncode == 2 and "no log of rank 5" in beyond.stderr, beyond
        assert "Traceback" not in beyond.stderr
    finally:
        cancel = distcomp(env, "cancel", job)
    assert cancel.returncode == 0, cancel.stderr
