"""Progress heartbeats (issue 37): runtime.progress and every metric call beat, written at most
once a second per rank into the job's progress folder, read back in rank order."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from distcomp.agent import progress


def test_a_beat_is_written_at_once_then_at_most_once_a_second(tmp_path: Path) -> None:
    beats = progress.Beats(str(tmp_path), "rank1", "2")
    beats.beat(5)
    first = progress.read(str(tmp_path))["rank1"]
    assert (first["step"], first["attempt"]) == (5, "2")
    beats.beat(6)  # within the second: kept, not written
    assert progress.read(str(tmp_path))["rank1"]["step"] == 5
    time.sleep(progress.INTERVAL)
    beats.beat(None)  # no step: the last one stands
    assert progress.read(str(tmp_path))["rank1"]["step"] == 6
    assert not list(tmp_path.glob("*.tmp"))


def test_lines_are_in_rank_order_with_their_age(tmp_path: Path) -> None:
    now = time.time()
    beats = {"rank10": {"step": 1, "at": now - 3}, "rank2": {"step": 7, "at": now - 0.2},
             "pid77": {"step": None, "at": now - 61}}
    assert progress.describe(beats, now) == ["rank2: step 7, 0 s ago", "rank10: step 1, 3 s ago",
                                              "pid77: alive, 61 s ago"]


@pytest.mark.slow
def test_a_rank_s_metric_calls_beat_mlflow_s_through_the_hook_too(tmp_path: Path, template_db: Path) -> None:
    """In a real rank process: runtime.log_metric, runtime.progress and mlflow's client calls
    (patched by distcomp's hook, as in a tracked rank) each beat under the rank's own name."""
    code = f"""
import os, time
os.environ.update({{"DISTCOMP_PROGRESS_DIR": {str(tmp_path)!r}, "RANK": os.environ["WHICH"]}})
from distcomp import runtime
from distcomp.agent import progress
runtime.progress()
runtime.log_metric("loss", 0.5, step=3)      # within the second: kept
time.sleep(progress.INTERVAL)
if os.environ["WHICH"] == "0":
    runtime.log_metrics({{"loss": 0.4}}, step=4)
else:
    from distcomp.runtime import _mlflow_hook
    from mlflow.tracking import client
    _mlflow_hook._patch_client(client.MlflowClient)
    from mlflow.entities import Metric
    try:
        client.MlflowClient("sqlite:///{tmp_path / 'x.db'}").log_batch("no-such-run", metrics=[Metric("loss", 1.0, 0, 9)])
    except Exception:
        pass  # no such run: the beat came first
"""
    shutil.copyfile(template_db, tmp_path / "x.db")  # a store MLflow made: no migrations in the rank
    for which in ("0", "1"):
        done = subprocess.run([sys.executable, "-c", code], env={**__import__("os").environ, "WHICH": which},
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
    beats = progress.read(str(tmp_path))
    assert {k: v["step"] for k, v in beats.items()} == {"rank0": 4, "rank1": 9}


def test_clearing_removes_beats_only_never_a_file_the_user_put_there(tmp_path: Path) -> None:
    progress.Beats(str(tmp_path), "rank0").beat(1)
    (tmp_path / "rank0.beat.99.tmp").write_text("half")  # a write a killed rank left
    (tmp_path / "notes.txt").write_text("mine")
    (tmp_path / "rank1").write_text("mine too")
    progress.clear(str(tmp_path))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt", "rank1"]
    assert progress.read(str(tmp_path)) == {}
