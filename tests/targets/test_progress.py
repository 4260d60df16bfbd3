"""Each rank's progress while a local job runs (issue 37): the ranks of jobs/beats beat with
every metric call, and `distcomp status RUN_DIR` shows each rank's last step and its age."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.targets._jobs import clean_env

JOB = Path(__file__).parent / "jobs" / "beats" / "component.yaml"


@pytest.mark.slow
def test_status_shows_each_rank_s_last_step_while_the_job_runs(tmp_path: Path) -> None:
    run_dir = tmp_path / "job"

    def cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "distcomp", *map(str, args)], cwd=tmp_path, env=clean_env(),
                              capture_output=True, text=True, timeout=120)

    started = cli("submit", "--target", "local", JOB, "--detach", "--run-dir", run_dir, "--no-tracking",
                  "-i", "steps=200", "-i", "step_s=0.2")
    assert started.returncode == 0, started.stderr
    try:
        deadline = time.monotonic() + 120
        lines: list[str] = []
        while time.monotonic() < deadline:
            shown = cli("status", run_dir)
            assert shown.returncode == 0, shown.stderr
            lines = [line.strip() for line in shown.stdout.splitlines() if re.match(r"\s+rank\d: ", line)]
            if len(lines) == 2 and all(int(re.search(r"step (\d+)", line).group(1)) >= 3 for line in lines):  # type: ignore[union-attr]
                break
            time.sleep(0.5)
        # both ranks beat (rank 1 logs nothing to MLflow: its metric calls are its heartbeat), recently
        assert [line.split(":")[0] for line in lines] == ["rank0", "rank1"], lines
        for line in lines:
            age = re.fullmatch(r"rank\d: step \d+, (\d+) s ago", line)
            assert age is not None and int(age.group(1)) < 15, line  # beats keep coming (a bound, under load)
        data = json.loads(cli("status", run_dir, "--json").stdout)
        assert set(data["details"]["progress"]) == {"rank0", "rank1"}
    finally:
        cancelled = cli("cancel", run_dir)
        assert cancelled.returncode == 0, cancelled.stderr
    assert json.loads((run_dir / "status.json").read_text())["state"] == "cancelled"
