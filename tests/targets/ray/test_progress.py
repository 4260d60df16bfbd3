"""Progress on the real two-node Ray cluster (issue 37): every rank beats into the job's
progress folder, which this machine keeps beside its record of the job (the dev cluster's nodes
share this machine's files), cleared at each attempt; a waiting `distcomp submit` in a terminal
shows the live line (step, rank 0's loss, the restart) and `distcomp status ray:ID` shows each
rank's last step. The job is jobs/progress: one rank per node, loss = 1 / (step + 1); rank 1
fails once, so the job's second attempt finishes it."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from tests._pty import CLEAR, under_pty

from .conftest import JOBS, distcomp, ray_env

JOB = JOBS / "progress" / "component.yaml"
FRAME = re.compile(r"distcomp submit: \d+:\d\d \| (\d+)/(\d+) ranks alive \| step (\d+) \| loss (\S+) \| (\d+) restarts?")
pytestmark = pytest.mark.slow


def test_ranks_beat_where_this_machine_reads_and_submit_and_status_show_them(ray_cluster: str,
                                                                            tmp_path: Path) -> None:
    env = ray_env(ray_cluster, tmp_path, XDG_STATE_HOME=str(tmp_path / "state"))
    code, screen, _ = under_pty([sys.executable, "-m", "distcomp", "submit", "--target", "ray", str(JOB),
                                 "--nodes", "2", "--max-restarts", "1", "--no-tracking",
                                 "-i", "steps=10", "-i", "fail_at=3", "-i", "step_s=0.6"], env, tmp_path, timeout=400)
    assert code == 0, screen
    job = next(line.split(CLEAR)[-1].strip() for line in screen.split("\r\n") if line.strip().startswith("ray:"))
    frames = [m for m in (FRAME.match(piece) for piece in screen.split(CLEAR)) if m]
    # both ranks (one per node) beat; the second attempt's beats say the restart; rank 0's loss is its last
    assert any(m.group(5) == "1" and m.group(1) == m.group(2) == "2" and int(m.group(3)) >= 4
               and m.group(4) == f"{1 / (int(m.group(3)) + 1):.4g}" for m in frames), [m.group(0) for m in frames]
    shown = distcomp(env, "status", job)
    assert shown.returncode == 0, shown.stderr
    lines = [line.strip() for line in shown.stdout.splitlines() if re.match(r"\s+rank\d: ", line)]
    assert [re.sub(r", \d+ s ago$", "", line) for line in lines] == ["rank0: step 9", "rank1: step 9"], shown.stdout
    beats = json.loads(distcomp(env, "status", job, "--json").stdout)["details"]["progress"]
    assert {name: (b["attempt"], b["step"], b["metric"]) for name, b in beats.items()} == {
        "rank0": ("1", 9, ["loss", 0.1]), "rank1": ("1", 9, ["loss", 0.1])}  # attempt 0's beats were cleared
    (folder,) = (tmp_path / "state" / "distcomp" / "ray").glob(f"*/{job.removeprefix('ray:')}.progress")
    assert sorted(p.name for p in folder.iterdir()) == ["rank0.beat", "rank1.beat"]
