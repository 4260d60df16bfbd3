"""Progress on the real two-node Slurm cluster (issue 37): every rank beats into the job
folder's progress/ (cleared at each attempt), a waiting `distcomp submit` in a terminal shows
the live line (step, rank 0's loss, the restart), and `distcomp status slurm:ID` shows each
rank's last step, from another process. The job is jobs/longjob: two torch ranks, one per node,
logging their loss per step; rank 1 fails once, so the job's second attempt finishes it."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests._pty import CLEAR, under_pty
from tests.targets._jobs import clean_env

from .conftest import JOBS

LONG = JOBS / "longjob" / "component.yaml"
FRAME = re.compile(r"distcomp submit: \d+:\d\d \| (\d+)/(\d+) ranks alive \| step (\d+) \| loss (\S+) \| (\d+) restarts?")
pytestmark = pytest.mark.slow


def test_ranks_beat_into_the_job_folder_and_submit_and_status_show_them(job_dir: Path, tmp_path: Path) -> None:
    env = clean_env(SLURM_CONF=os.environ["SLURM_CONF"], PATH=os.environ["PATH"])
    code, screen, _ = under_pty([sys.executable, "-m", "distcomp", "submit", "--target", "slurm", str(LONG),
                                 "--nodes", "2", "--job-dir", str(job_dir), "--max-restarts", "1", "--no-tracking",
                                 "-i", "steps=10", "-i", "fail_at=3", "-i", "step_s=0.6"], env, tmp_path, timeout=400)
    assert code == 0, screen
    job = next(line.split(CLEAR)[-1].strip() for line in screen.split("\r\n") if line.strip().startswith("slurm:"))
    frames = [m for m in (FRAME.match(piece) for piece in screen.split(CLEAR)) if m]
    assert frames, screen
    # both ranks (one per node) beat; the second attempt's beats say the restart
    assert any(m.group(5) == "1" and m.group(1) == m.group(2) == "2" and int(m.group(3)) >= 4 for m in frames), \
        [m.group(0) for m in frames]
    shown = subprocess.run([sys.executable, "-m", "distcomp", "status", job], env=env, capture_output=True, text=True,
                           timeout=120)
    assert shown.returncode == 0, shown.stderr
    lines = [line.strip() for line in shown.stdout.splitlines() if re.match(r"\s+rank\d: ", line)]
    assert [re.sub(r", \d+ s ago$", "", line) for line in lines] == ["rank0: step 9", "rank1: step 9"], shown.stdout
    data = json.loads(subprocess.run([sys.executable, "-m", "distcomp", "status", job, "--json"], env=env,
                                     capture_output=True, text=True, timeout=120).stdout)
    beats = data["details"]["progress"]
    assert {name: (b["attempt"], b["step"], b["metric"][0]) for name, b in beats.items()} == {
        "rank0": ("1", 9, "loss"), "rank1": ("1", 9, "loss")}  # attempt 0's beats were cleared
    folder = Path(data["details"]["folder"])
    assert sorted(p.name for p in (folder / "progress").iterdir()) == ["rank0.beat", "rank1.beat"]
