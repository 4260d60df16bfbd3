"""What a rank logs reaches the store or is counted: kept through a server's outage and
delivered when it is back (``flush()`` says False until then), kept on disk in the run folder,
counted exactly, when the process ends first (SIGTERM)."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from ..tracking._server import Server
from ._stores import Store, notices, started

OUTAGE = """
    import json, sys
    import distcomp.runtime as rt

    def say(flushed):
        print(json.dumps({"flushed": flushed, "undelivered": rt.undelivered().as_dict()}), flush=True)

    for i in range(100):
        rt.log_metric("m", float(i), step=i)
    say(rt.flush(60))
    sys.stdin.readline()  # the server is down now
    for i in range(100, 200):
        rt.log_metric("m", float(i), step=i)
    rt.log_param("during", "outage")
    say(rt.flush())  # does not wait for the server: says what it holds
    sys.stdin.readline()  # the server is back
    say(rt.flush(120))
"""


@pytest.mark.slow
def test_what_the_server_missed_is_delivered_when_it_is_back(own_server: Server, tmp_path: Path) -> None:
    store = Store("server", tmp_path, own_server.uri, own_server.home)
    run = store.new_run()
    with started(OUTAGE, store.env(run), stdin=True) as proc:
        assert proc.stdin is not None and proc.stdout is not None

        def answer(after: str = "") -> dict:
            if after:
                proc.stdin.write(after + "\n")  # type: ignore[union-attr]
                proc.stdin.flush()  # type: ignore[union-attr]
            line = proc.stdout.readline()  # type: ignore[union-attr]
            assert line, proc.communicate()[1][-3000:]
            return json.loads(line)

        assert answer() == {"flushed": True, "undelivered": {"metrics": 0, "params": 0, "artifacts": 0}}
        own_server.stop()
        assert answer("down") == {"flushed": False, "undelivered": {"metrics": 100, "params": 1, "artifacts": 0}}
        own_server.start()
        assert answer("back") == {"flushed": True, "undelivered": {"metrics": 0, "params": 0, "artifacts": 0}}
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err[-3000:]
    assert store.history(run, "m") == [(i, float(i)) for i in range(200)]
    assert store.client.get_run(run).data.params == {"during": "outage"}
    (warning,) = notices(err)  # one notice of the outage; nothing lost, so nothing at exit
    assert "did not take what was logged" in warning and "cannot reach the MLflow server" in warning


SIGTERMED = """
    import time
    import distcomp.runtime as rt
    for i in range(200_000):
        rt.log_metric("m", float(i), step=i)
    print("logged", flush=True)
    time.sleep(60)
"""


@pytest.mark.slow
def test_sigterm_keeps_on_disk_exactly_what_it_could_not_send(store: Store, tmp_path: Path) -> None:
    run = store.new_run()
    reports = tmp_path / "reports"
    env = store.env(run, DISTCOMP_SIGTERM_FLUSH_S="0", DISTCOMP_TRACKING_DIR=str(reports))  # give up at once
    with started(SIGTERMED, env) as proc:
        assert proc.stdout is not None and proc.stdout.readline() == "logged\n"
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=90)
    assert proc.returncode == -signal.SIGTERM, err[-3000:]
    found = re.search(r"at SIGTERM: ([\d,]+) metric points wait in (\S+) ", err)
    assert found, err[-3000:]
    waiting = int(found.group(1).replace(",", ""))
    kept = len(store.client.get_metric_history(run, "m"))
    assert kept + waiting == 200_000 and waiting > 0  # nothing lost: stored, or kept on disk
    assert "were not logged" not in err
    lines = Path(found.group(2)).read_text().splitlines()
    assert sum(len(json.loads(line)["m"]) for line in lines) == waiting  # what it says waits, exactly
    report = json.loads(next(reports.glob("undelivered-*.json")).read_text())
    assert report["reason"] == "SIGTERM" and report["waiting"]["metrics"] == waiting
    assert report["undelivered"]["metrics"] == 0


@pytest.mark.slow
def test_os_exit_after_a_flush_keeps_everything(store: Store) -> None:
    """``os._exit`` skips every exit hook: the documented way is ``flush()`` first."""
    code = ("import os, distcomp.runtime as rt\n[rt.log_metric('m', float(i), step=i) for i in range(3000)]\n"
            "os._exit(0 if rt.flush(60) else 3)")
    run = store.new_run()
    proc = subprocess.run([sys.executable, "-c", code], env=store.env(run), capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert len(store.client.get_metric_history(run, "m")) == 3000
