"""A beat carries the rank's latest metric (issue 37): ``runtime.log_metric(s)`` and MLflow's
metric calls through the hook keep their ``(name, value)`` in the rank's beat file, which the
live line reads rank 0's of; a beat written before metrics were kept (none in it) still reads.
The live line's facts (``cli._live.frame``) come from those beats."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from distcomp.agent import progress
from distcomp.cli._live import ALIVE_S, frame


def test_a_beat_keeps_the_latest_metric_and_an_old_beat_reads_without_one(tmp_path: Path) -> None:
    beats = progress.Beats(str(tmp_path), "rank0")
    beats.beat(1, ("loss", 0.5))
    assert progress.metric_of(progress.read(str(tmp_path))["rank0"]) == ("loss", 0.5)
    beats.beat(2)  # within the second, no metric: the last one is kept for the next write
    time.sleep(progress.INTERVAL)
    beats.beat(3)
    assert progress.metric_of(progress.read(str(tmp_path))["rank0"]) == ("loss", 0.5)
    # a beat file as the first step of issue 37 wrote it: no metric key
    (tmp_path / "rank1.beat").write_text(json.dumps({"step": 4, "at": time.time(), "attempt": "0", "pid": 1}))
    old = progress.read(str(tmp_path))["rank1"]
    assert old["step"] == 4 and progress.metric_of(old) is None
    assert progress.describe({"rank1": old}, float(old["at"])) == ["rank1: step 4, 0 s ago"]  # type: ignore[arg-type]
    for bad in (["loss"], ["loss", "high"], [3, 1.0], ["loss", True], "loss"):
        assert progress.metric_of({"metric": bad}) is None


@pytest.mark.slow
def test_every_metric_call_beats_with_its_metric(tmp_path: Path, template_db: Path) -> None:
    """In real rank processes: log_metrics' first metric, log_metric's, and MLflow's
    log_metric and log_batch (patched by distcomp's hook, as in a tracked rank)."""
    calls = {
        "0": 'runtime.log_metrics({"loss": 0.25, "acc": 0.5}, step=4)',
        "1": 'runtime.log_metric("acc", 0.75, step=2)',
        "2": 'hooked().log_metric("no-such-run", "lr", 0.125, 0, 6)',
        "3": 'hooked().log_batch("no-such-run", metrics=[metric("grad", 2.5, 0, 8), metric("lr", 1.0, 0, 8)])',
    }
    shutil.copyfile(template_db, tmp_path / "x.db")  # a store MLflow made: no migrations in the ranks
    for rank, call in calls.items():
        code = f"""
import os
os.environ.update({{"DISTCOMP_PROGRESS_DIR": {str(tmp_path)!r}, "RANK": {rank!r}}})
from distcomp import runtime

def metric(*args):  # MLflow is imported by the ranks that call it, as in a rank
    from mlflow.entities import Metric
    return Metric(*args)

def hooked():
    from distcomp.runtime import _mlflow_hook
    from mlflow.tracking import client
    _mlflow_hook._patch_client(client.MlflowClient)
    return client.MlflowClient("sqlite:///{tmp_path / 'x.db'}")

try:
    {call}
except Exception:
    pass  # no such run: the beat came first
"""
        done = subprocess.run([sys.executable, "-c", code], env=dict(os.environ), capture_output=True, text=True,
                              timeout=120)
        assert done.returncode == 0, done.stderr
    beats = progress.read(str(tmp_path))
    assert {k: (v["step"], progress.metric_of(v)) for k, v in beats.items()} == {
        "rank0": (4, ("loss", 0.25)), "rank1": (2, ("acc", 0.75)), "rank2": (6, ("lr", 0.125)),
        "rank3": (8, ("grad", 2.5))}


def test_the_live_line_says_ranks_alive_the_latest_step_rank_0_s_metric_and_restarts() -> None:
    now = 1000.0
    beats = {"rank0": {"step": 7, "at": now - 1, "attempt": "2", "metric": ["loss", 0.123456]},
             "rank1": {"step": 9, "at": now - 0.5, "attempt": "2"},
             "rank2": {"step": 3, "at": now - ALIVE_S - 1, "attempt": "1"}}  # stalled, and of an old attempt
    shown = frame(beats, 75.0, 0, now)
    assert (shown.alive, shown.ranks, shown.step, shown.metric, shown.restarts) == (2, 3, 9, ("loss", 0.123456), 2)
    assert shown.text("run") == "distcomp run: 1:15 | 2/3 ranks alive | step 9 | loss 0.1235 | 2 restarts"
    # before any beat; a rank that logged no metric yet; a restart known apart from the beats
    assert frame({}, 3725.0, 1, now).text("submit") == "distcomp submit: 1:02:05 | no rank has beaten yet | 1 restart"
    assert frame({"rank0": {"step": None, "at": now}}, 0, 0, now).text("run") == \
        "distcomp run: 0:00 | 1/1 ranks alive | 0 restarts"


def test_the_last_beat_kept_within_its_second_is_written_as_the_rank_leaves(tmp_path: Path) -> None:
    """A rank's last step comes within a second of the write before it: its exit writes it (and
    ``runtime.finish()`` does, for a script that leaves with ``os._exit``), stamped when it came."""
    for leave in ("pass", "runtime.finish(); os._exit(0)"):
        code = f"""
import os, time
os.environ.update({{"DISTCOMP_PROGRESS_DIR": {str(tmp_path)!r}, "RANK": "0"}})
from distcomp import runtime
runtime.log_metric("loss", 0.5, step=1)
runtime.log_metric("loss", 0.25, step=2)  # within the second: kept
time.sleep(0.3)
{leave}
"""
        started = time.time()
        done = subprocess.run([sys.executable, "-c", code], env=dict(os.environ), capture_output=True, text=True,
                              timeout=120)
        assert done.returncode == 0, done.stderr
        beat = progress.read(str(tmp_path))["rank0"]
        assert (beat["step"], progress.metric_of(beat)) == (2, ("loss", 0.25)), leave
        assert started < float(beat["at"]) < time.time() - 0.25, leave  # type: ignore[arg-type]
        progress.clear(str(tmp_path))
