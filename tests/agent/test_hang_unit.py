"""Finding a stalled job (``distcomp.agent.hang``) with real processes: the site hook registers
the stack dump on SIGUSR2 in a rank (not in its Python children, not leaking its fd, not in the
way of a handler the rank sets itself), the watch fires only once beats came and then went
quiet among live ranks, a collective is told by its frame or its line, and the one supervision
loop ends a stalled job as failed with every rank's stack and nothing left running."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from distcomp.agent import hang, procs, progress, supervise

PY = sys.executable
HOST = os.uname().nodename


def _rank_env(tmp_path: Path, rank: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DISTCOMP_") and k not in ("RANK", "PYTHONPATH")}
    env["RANK"] = str(rank)
    return hang.rank_env(env, str(tmp_path / "stacks"), str(tmp_path / "progress"))


def _spawn(tmp_path: Path, code: str, rank: int = 0) -> subprocess.Popen[str]:
    script = tmp_path / f"rank{rank}.py"
    script.write_text(textwrap.dedent(code))
    return subprocess.Popen([PY, str(script)], env=_rank_env(tmp_path, rank), stdout=subprocess.PIPE, text=True,
                            cwd=tmp_path)


def _until(ok, timeout: float = 20.0) -> None:  # type: ignore[no-untyped-def]
    end = time.monotonic() + timeout
    while not ok():
        assert time.monotonic() < end, "not in time"
        time.sleep(0.05)


SLEEPER = """
import threading, time

def helper():
    time.sleep(60)

def waiting_here():
    print("ready", flush=True)
    time.sleep(60)  # main thread

threading.Thread(target=helper, daemon=True).start()
waiting_here()
"""


def test_the_site_hook_dumps_the_rank_s_main_thread_on_the_signal(tmp_path: Path) -> None:
    proc = _spawn(tmp_path, SLEEPER, rank=2)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        stacks = str(tmp_path / "stacks")
        assert hang.registered(stacks, HOST) == {proc.pid: "rank2"}
        assert hang.registered(stacks, "another-node") == {}  # a shared folder: another node's pids mean nothing
        time.sleep(0.5)  # into the sleep, past the print
        os.kill(proc.pid, hang.SIGNAL)
        path = tmp_path / "stacks" / "rank2.stack"
        _until(lambda: "most recent call first" in path.read_text())
        time.sleep(0.2)
        found = hang.parse("rank2", path.read_text())
        assert found is not None and found.pid == proc.pid and found.host == HOST
        assert found.frames[0].function == "waiting_here"  # the main thread, not the helper's
        line = textwrap.dedent(SLEEPER).splitlines().index("    time.sleep(60)  # main thread") + 1
        assert found.top is not None and found.top.where().endswith(f"rank2.py:{line} in waiting_here")
        assert found.collective is None
        assert proc.poll() is None  # the dump does not end the rank
    finally:
        proc.kill()
        proc.wait()


def test_a_python_child_of_the_rank_registers_nothing_and_gets_no_fd(tmp_path: Path) -> None:
    code = """
    import os, subprocess, sys
    child = subprocess.run([sys.executable, "-c", "import os; print(sorted(os.path.realpath(f'/proc/self/fd/' + f) "
                            "for f in os.listdir('/proc/self/fd')))"], capture_output=True, text=True)
    print(child.stdout.strip(), flush=True)
    """
    proc = _spawn(tmp_path, code, rank=1)
    out, _ = proc.communicate(timeout=30)
    path = tmp_path / "stacks" / "rank1.stack"
    assert str(path) not in out, out  # close-on-exec: the child's fds are its own
    assert path.read_text().startswith(f"distcomp stacks: rank1 pid {proc.pid} ")  # the rank's, not its child's
    assert path.read_text().endswith(hang.LEAVING.decode())  # its Python ended: its code was done
    assert [p.name for p in (tmp_path / "stacks").iterdir()] == ["rank1.stack"]


def test_a_handler_the_rank_sets_itself_wins(tmp_path: Path) -> None:
    code = """
    import signal, sys, time
    got = []
    signal.signal(signal.SIGUSR2, lambda *a: got.append(1))
    print("ready", flush=True)
    end = time.monotonic() + 20
    while not got and time.monotonic() < end:
        time.sleep(0.05)
    print("mine" if got else "none", flush=True)
    """
    proc = _spawn(tmp_path, code)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    os.kill(proc.pid, hang.SIGNAL)
    out, _ = proc.communicate(timeout=30)
    assert (out.strip(), proc.returncode) == ("mine", 0)


def test_a_collective_is_told_by_its_frame_or_by_the_line_that_called_into_c(tmp_path: Path) -> None:
    torch_frame = hang.Frame("/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py", 3, "all_reduce")
    user = tmp_path / "train.py"
    user.write_text("import x\n\ncomm.Allreduce(send, recv)\ntime.sleep(1)\n")
    assert hang.collective([torch_frame, hang.Frame(str(user), 4, "<module>")]) == "all_reduce"
    assert hang.collective([hang.Frame(str(user), 3, "<module>")]) == "Allreduce"  # mpi4py: no Python frame of its own
    assert hang.collective([hang.Frame(str(user), 4, "<module>")]) is None
    tf = hang.Frame("/venv/lib/python3.11/site-packages/tensorflow/python/ops/gen_collective_ops.py", 9,
                    "collective_reduce_v2")
    assert hang.collective([tf]) == "collective_reduce_v2"


def _beat(folder: Path, name: str, at: float, pid: int, attempt: str = "0") -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}{progress.SUFFIX}").write_text(json.dumps({"step": 3, "at": at, "attempt": attempt, "pid": pid}))


def test_the_watch_fires_only_after_a_beat_and_only_for_a_live_rank(tmp_path: Path) -> None:
    beats, stacks = tmp_path / "progress", tmp_path / "stacks"

    def watch() -> hang.Watch:
        return hang.Watch(5.0, str(beats), str(stacks), attempt="0")

    assert not watch().due(lambda: {101})  # no beat yet: start-up may be long
    now = time.time()
    _beat(beats, "rank0", now - 1, 101)
    assert not watch().due(lambda: {101})  # beat a second ago
    _beat(beats, "rank0", now - 20, 101)
    assert watch().due(lambda: {101})  # quiet for 20 s, and still running here
    assert not watch().due(lambda: {202})  # it ended (or runs on another node): not hung
    _beat(beats, "rank0", now - 20, 101, attempt="1")
    assert not watch().due(lambda: {101})  # an earlier attempt's beat does not count
    w = watch()
    _beat(beats, "rank0", now - 20, 101)
    assert w.due(lambda: {101}) and not w.due(lambda: {101})  # one look a second


STEPPER = """
import os, sys, time
from distcomp.agent.progress import Beats

def stuck_here():
    while True:
        time.sleep(1)

beats = Beats(os.environ["DISTCOMP_PROGRESS_DIR"], "rank" + os.environ["RANK"])
beats.beat(0)
if os.environ["RANK"] == "1":
    stuck_here()
from subprocess import run
run([sys.executable, "-c", "import time; time.sleep(120)"])  # a child that must not survive
"""


@pytest.mark.slow
def test_the_loop_ends_a_stalled_job_as_failed_with_every_rank_s_stack(tmp_path: Path) -> None:
    class Sink:
        def feed(self, data: bytes) -> None:
            pass

    (tmp_path / "rank.py").write_text(STEPPER)
    starts = [supervise.Start(f"rank{r}", [PY, str(tmp_path / "rank.py")], _rank_env(tmp_path, r), str(tmp_path),
                              Sink()) for r in (0, 1)]
    watch = hang.Watch(2.0, str(tmp_path / "progress"), str(tmp_path / "stacks"), wait=3.0)
    t0 = time.monotonic()
    done = supervise.supervise(starts, 1.0, hang=watch, deadline=time.monotonic() + 60)
    assert done.outcome == "failed" and done.stall is not None and done.failed is None
    assert time.monotonic() - t0 < 20 and done.after >= 2.0
    stall = done.stall
    assert [s.name for s in stall.stacks] == ["rank0", "rank1"]
    assert stall.blamed == "rank0"  # neither waits in a collective: the first is named
    text = stall.describe()
    assert text.startswith("hung: no rank made progress for ")
    line = STEPPER.splitlines().index("        time.sleep(1)") + 1
    assert f"rank1 is not in a collective: {tmp_path / 'rank.py'}:{line} in stuck_here" in text, text
    assert all(p.code is not None for p in done.processes)
    pids = {p.pid for p in done.processes if p.pid} | watch.job
    time.sleep(0.2)
    assert not [pid for pid in pids if procs.alive(pid)]  # every rank and the child: none left


@pytest.mark.slow
def test_no_beat_no_hang_in_the_loop(tmp_path: Path) -> None:
    class Sink:
        def feed(self, data: bytes) -> None:
            pass

    env = _rank_env(tmp_path, 0)
    starts = [supervise.Start("rank0", [PY, "-c", "import time; time.sleep(30)"], env, str(tmp_path), Sink())]
    watch = hang.Watch(1.0, str(tmp_path / "progress"), str(tmp_path / "stacks"))
    done = supervise.supervise(starts, 1.0, hang=watch, deadline=time.monotonic() + 4)
    assert (done.outcome, done.stall) == ("timed_out", None)
    assert done.processes[0].code == -signal.SIGTERM
