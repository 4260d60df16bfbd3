"""Rendezvous ports: many jobs started at once each get their own, a port another program
takes between distcomp's pick and the rank's bind costs a retry, not the job, and two
distcomp processes never hand out the same port."""

from __future__ import annotations

import pytest
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from tests.targets._jobs import WAIT, clean_env, finish
from tests.targets._supervised import launch, record, status, survivors

JOBS_AT_ONCE = 8


@pytest.mark.slow
def test_jobs_started_at_once_each_bind_their_own_port(tmp_path: Path) -> None:
    """Every rank 0 binds its MASTER_PORT only after all of them have started (a barrier), so
    each port was picked before any was bound: the window in which two jobs could be handed
    one port is as wide as it gets."""
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    env = {"BARRIER_DIR": str(barrier), "BARRIER_COUNT": str(2 * JOBS_AT_ONCE)}
    t0 = time.monotonic()
    started = [launch(tmp_path, "--grace", "2", "--timeout", "120", name=f"j{i}", env=env, mode="bind", hold=1)
               for i in range(JOBS_AT_ONCE)]
    runs = [finish(*s, t0) for s in started]
    ports = []
    for run in runs:
        assert run.returncode == 0, run.explain()
        port = record(run.state_dir, 0)["port"]
        assert record(run.state_dir, 1)["port"] == port
        assert f"rank 1: reached rank 0 on port {port}" in run.log("rank1")
        assert (run.run_dir / "outputs" / "result" / "port.txt").read_text() == f"{port}\n"
        assert run.status["port_retries"] == 0
        ports.append(port)
    assert len(set(ports)) == JOBS_AT_ONCE, ports


def test_port_taken_between_pick_and_bind_starts_the_attempt_again(tmp_path: Path) -> None:
    """Rank 1 has another process bind MASTER_PORT before rank 0 gets to it (once): rank 0
    fails with EADDRINUSE, and the attempt starts again on a fresh port, not as a restart."""
    t0 = time.monotonic()
    run = finish(*launch(tmp_path, "--grace", "2", mode="squat", hold=0), t0)
    assert run.returncode == 0, run.explain()
    squat = json.loads((run.state_dir / "squat.json").read_text())
    assert ("distcomp run: attempt 1: rank0 found a port taken (Address already in use): another program bound "
            "it after distcomp picked it; starting the attempt again on fresh ports (not counted as a restart)\n"
            ) in run.stderr, run.explain()
    st = status(run.run_dir)
    assert (st["state"], st["attempts"], st["port_retries"], st["failures"]) == ("succeeded", 1, 1, [])
    log = run.log("rank0")
    assert log.count("=== attempt 1: ") == 1 and log.count("=== attempt 1 (port retry 1): ") == 1, log
    assert f"rank 0: cannot bind MASTER_PORT {squat['port']}: [Errno 98] Address already in use" in log
    port = int((run.run_dir / "outputs" / "result" / "port.txt").read_text())
    assert port != squat["port"] and record(run.state_dir, 0)["port"] == port
    assert not (run.state_dir / "rank0.1.json").exists()  # the retry is no restart: TORCHELASTIC_RESTART_COUNT 0
    assert survivors([squat["pid"]], 2.0) == []


PICK = """
import json, os, sys, time
from distcomp.targets.local._ports import free_ports
barrier, count = sys.argv[1], int(sys.argv[2])
open(os.path.join(barrier, str(os.getpid())), "w").close()
while len(os.listdir(barrier)) < count:
    time.sleep(0.005)
print(json.dumps(free_ports(200)))
"""


def test_distcomp_processes_never_hand_out_the_same_port(tmp_path: Path) -> None:
    """Four processes pick 200 ports each at the same moment. A port is free only until it is
    bound, so without a reservation the kernel hands some out twice (on this machine a few
    of the 800, every time)."""
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    (tmp_path / "tmp").mkdir()
    env = clean_env(TMPDIR=str(tmp_path / "tmp"))  # the reservations of this test only
    procs = [subprocess.Popen([sys.executable, "-c", PICK, str(barrier), "4"], stdout=subprocess.PIPE, text=True,
                              env=env) for _ in range(4)]
    picked = [json.loads(p.communicate(timeout=WAIT)[0]) for p in procs]
    every = [port for ports in picked for port in ports]
    assert len(every) == 800 and len(set(every)) == 800, f"{800 - len(set(every))} port(s) handed out twice"
    reserved = os.listdir(tmp_path / "tmp" / f"distcomp-{os.getuid()}" / "ports")
    assert sorted(int(n) for n in reserved if n.isdigit()) == sorted(every)
