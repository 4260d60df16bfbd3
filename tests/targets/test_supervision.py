"""Nothing outlives a job: ``distcomp run`` killed with SIGKILL, a machine that lost both the
supervisor and its watchdog (``distcomp reap``), and ranks whose children leave the job's
process group. Real ``distcomp run`` processes, real ranks, a real MLflow SQLite store."""

from __future__ import annotations

import fcntl
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from tests.targets._jobs import WAIT, clean_env, finish, wait_for
from tests.targets._supervised import (Console, launch, my_start_time, record, running, running_record, status,
                                      survivors)

HOST = socket.gethostname()
TALKED = [f"[rank{r}]: rank {r} line {i}" for r in (0, 1) for i in range(5)]
NO_CGROUP = ("; the job had no cgroup: a process that cleared its environment and left the ranks' process tree is "
             "found only if its watchdog saw the supervisor adopt it")


def _cgroups_here() -> bool:
    """Whether this machine gives a job a cgroup (cgroup v2, one this process may write)."""
    from distcomp.targets.local import _cgroup

    made = _cgroup.create(os.urandom(8).hex())
    if made is not None:
        _cgroup.remove(made.path)
    return made is not None


CGROUPS = _cgroups_here()
WITH_CGROUP = pytest.param(True, id="cgroup", marks=pytest.mark.skipif(
    not CGROUPS, reason="no cgroup v2 this user may write here: the no-cgroup case runs instead"))


def no_cgroup(run_dir: Path) -> str:
    """What a job's final message adds when the job had no cgroup."""
    return "" if status(run_dir).get("cgroup") else NO_CGROUP


def mlflow_run(uri: str, run_id: str):  # type: ignore[no-untyped-def]
    from mlflow import MlflowClient

    return MlflowClient(uri).get_run(run_id)


def artifacts(uri: str, run_id: str) -> set[str]:
    from mlflow import MlflowClient

    client = MlflowClient(uri)
    return {a.path for a in client.list_artifacts(run_id)} | {a.path for a in client.list_artifacts(run_id, "logs")}


def rank_pids(state_dir: Path) -> list[int]:
    return [record(state_dir, r)["pid"] for r in (0, 1)]


@pytest.mark.slow
def test_sigkill_of_distcomp_run_stops_every_rank_and_closes_the_run(sqlite_uri: str, tmp_path: Path) -> None:
    # no node monitor: it leaves by itself once the supervisor is gone, so whether it is among the
    # processes counted is a race (tests/tracking/test_monitor.py tests it leaves)
    proc, run_dir, state_dir = launch(tmp_path, "--grace", "2", "--no-system-metrics", tracking=sqlite_uri,
                                      mode="talk")
    console = Console(proc)
    wait_for([state_dir / "rank0.0.json", state_dir / "rank1.0.json"], proc)
    shown = console.wait_for(TALKED)

    # while it runs: status.json says so, and who runs it; so do the MLflow run's tags
    running_status = status(run_dir)
    assert (running_status["state"], running_status["exit_code"]) == ("running", None)
    sup = running_status["supervisor"]
    assert (sup["pid"], sup["host"]) == (proc.pid, HOST)
    assert sup["start_time"] and sup["boot_id"] and running(sup["watchdog_pid"])
    marker = run_dir / "outputs" / "result.distcomp-incomplete"
    assert running_status["incomplete_outputs"] == {"result": str(marker)} and marker.is_file()
    run_id = running_status["mlflow"]["run_id"]
    run = mlflow_run(sqlite_uri, run_id)
    assert run.info.status == "RUNNING"
    assert (run.data.tags["distcomp.supervisor.pid"], run.data.tags["distcomp.supervisor.host"]) == (str(proc.pid), HOST)
    # what the console showed is on disk already, while the job runs
    for r in (0, 1):
        log = (run_dir / "logs" / f"rank{r}.log").read_text()
        assert [f"rank {r} line {i}" for i in range(5)] == log.splitlines()[1:], log

    ranks = rank_pids(state_dir)
    proc.kill()
    _, err = proc.communicate(timeout=WAIT)  # the watchdog writes to distcomp's stderr: read to its end
    assert proc.returncode == -signal.SIGKILL
    assert survivors(ranks) == [], "ranks outlived their supervisor"
    assert survivors([sup["watchdog_pid"]], 5) == []  # its stderr closed as it exited: give it a moment

    final = status(run_dir)
    message = (f"the supervisor (pid {proc.pid} on host {HOST}) died; its watchdog stopped every rank "
               f"(2 process(es) were still running){no_cgroup(run_dir)}")
    assert (final["state"], final["exit_code"], final["message"]) == ("failed", 1, message), final
    assert final["reaped"]["by"] == "watchdog" and final["supervisor"] == sup
    assert final["incomplete_outputs"] == {"result": str(marker)} and "failed" in marker.read_text()
    assert f"distcomp reap: {run_dir}: {message}; status.json: failed; MLflow run {run_id}: FAILED\n" in err, err
    run = mlflow_run(sqlite_uri, run_id)
    assert run.info.status == "FAILED"
    assert run.data.tags["distcomp.failure"] == message and run.data.tags["distcomp.state"] == "failed"
    assert {"logs/rank0.log", "logs/rank1.log", "status.json"} <= artifacts(sqlite_uri, run_id)
    for line in shown:  # every line the console showed is in its rank's log
        name, text = line[1:].split("]: ", 1)
        assert text in (run_dir / "logs" / f"{name}.log").read_text()


@pytest.mark.slow
def test_reap_closes_a_job_whose_supervisor_and_watchdog_died(sqlite_uri: str, tmp_path: Path) -> None:
    """A machine crash as seen by what is left: both distcomp processes gone (SIGKILL, the
    watchdog first so it cannot act), the ranks still running. ``distcomp reap`` (run folders
    under ./runs) closes that job and leaves the live one next to it alone."""
    # no node monitors: whether one is still there to count when reap comes is a race (see above)
    dead, dead_dir, dead_state = launch(tmp_path, "--no-system-metrics", run_dir=tmp_path / "runs" / "dead",
                                        name="dead", tracking=sqlite_uri, mode="talk")
    live, live_dir, live_state = launch(tmp_path, "--grace", "2", "--no-system-metrics",
                                        run_dir=tmp_path / "runs" / "live", name="live", tracking=sqlite_uri,
                                        mode="talk")
    for state in (dead_state, live_state):
        wait_for([state / "rank0.0.json", state / "rank1.0.json"], dead if state == dead_state else live)
    watchdog = status(dead_dir)["supervisor"]["watchdog_pid"]
    os.kill(watchdog, signal.SIGKILL)
    assert survivors([watchdog], 5) == []
    dead.kill()
    dead.communicate(timeout=WAIT)
    ranks = rank_pids(dead_state)
    time.sleep(0.5)
    assert all(running(p) for p in ranks), "nothing was left to reap: the test is not testing reap"
    assert status(dead_dir)["state"] == "running"

    reap = subprocess.run([sys.executable, "-m", "distcomp", "reap", "--grace", "2"], cwd=tmp_path, env=clean_env(),
                          capture_output=True, text=True, timeout=WAIT)
    assert reap.returncode == 0, reap.stderr
    dead_run = status(dead_dir)["mlflow"]["run_id"]
    message = (f"the supervisor (pid {dead.pid} on host {HOST}) died; distcomp reap stopped every rank "
               f"(2 process(es) were still running){no_cgroup(dead_dir)}")
    assert re.fullmatch(
        re.escape(f"distcomp reap: runs/dead: {message}; status.json: failed; MLflow run {dead_run}: FAILED\n")
        + re.escape(f"distcomp reap: runs/live: in use by job live (pid {live.pid} on host {HOST}, since ")
        + r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\): left alone\n"
        + re.escape("distcomp reap: 2 run folder(s) under ./runs: 1 closed, 1 running, 0 on another host, "
                    "0 already ended\n"), reap.stdout), reap.stdout + reap.stderr
    assert survivors(ranks, 5) == []
    closed = status(dead_dir)
    assert (closed["state"], closed["message"], closed["reaped"]["by"]) == ("failed", message, "distcomp reap")
    run = mlflow_run(sqlite_uri, dead_run)
    assert (run.info.status, run.data.tags["distcomp.failure"]) == ("FAILED", message)

    # the live job was not touched: it runs on, and ends as it would have
    assert status(live_dir)["state"] == "running"
    assert all(running(p) for p in rank_pids(live_state))
    live.send_signal(signal.SIGINT)
    ended = finish(live, live_dir, live_state, time.monotonic())
    assert ended.returncode == 130, ended.explain()
    assert status(live_dir)["state"] == "cancelled"
    assert mlflow_run(sqlite_uri, status(live_dir)["mlflow"]["run_id"]).info.status == "KILLED"
    assert survivors(rank_pids(live_state)) == []

    again = subprocess.run([sys.executable, "-m", "distcomp", "reap"], cwd=tmp_path, env=clean_env(),
                           capture_output=True, text=True, timeout=WAIT)
    assert (again.returncode, again.stdout) == (0, "distcomp reap: 2 run folder(s) under ./runs: 0 closed, 0 running, "
                                                   "0 on another host, 2 already ended\n"), again.stderr


def test_reap_tells_a_live_supervisor_from_a_reused_pid_and_leaves_other_hosts_alone(tmp_path: Path) -> None:
    me = os.getpid()  # a process that runs: the pid of a supervisor, or a pid reused by another program
    alive = running_record(tmp_path, "alive", pid=me, host=HOST, start_time=my_start_time())
    reused = running_record(tmp_path, "reused", pid=me, host=HOST, start_time=1)
    remote = running_record(tmp_path, "remote", pid=me, host="elsewhere.example", start_time=1)

    def reap(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "distcomp", "reap", *args], cwd=tmp_path, env=clean_env(),
                              capture_output=True, text=True, timeout=WAIT)

    (tmp_path / "garbled").mkdir()
    (tmp_path / "garbled" / "status.json").write_text('{"state": "runn')  # a disk that filled up, by hand
    proc = reap("alive", "reused", "remote", "garbled")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == (
        f"distcomp reap: alive: job alive is running (pid {me} on host {HOST}): left alone\n"
        f"distcomp reap: reused: the supervisor (pid {me} on host {HOST}) died; distcomp reap stopped every rank "
        f"(0 process(es) were still running){NO_CGROUP}; status.json: failed\n"
        f"distcomp reap: remote: job remote runs on host elsewhere.example (pid {me}): it cannot be checked from "
        f"{HOST}; run distcomp reap on elsewhere.example, or give --force to mark it failed from here\n"
        "distcomp reap: garbled: no readable status.json: nothing to do\n"
        "distcomp reap: 4 run folder(s): 1 closed, 1 running, 1 on another host, 1 already ended\n")
    assert [status(d)["state"] for d in (alive, reused, remote)] == ["running", "failed", "running"]

    forced = reap("--force", "remote")
    assert forced.returncode == 0, forced.stderr
    assert status(remote)["state"] == "failed"
    assert status(remote)["message"] == (f"the supervisor (pid {me} on host elsewhere.example) was marked failed "
                                         f"from {HOST} with --force; its processes on elsewhere.example, if any, "
                                         "were not stopped")

    (tmp_path / "empty").mkdir()
    bad = reap("empty", "nope")
    assert bad.returncode == 2 and bad.stdout == ""
    assert bad.stderr == ("distcomp reap: empty: not a run folder (no status.json in it); give folders that "
                          "`distcomp run` made, or none for those under ./runs\n"
                          "nope: not a run folder (no status.json in it); give folders that `distcomp run` made, "
                          "or none for those under ./runs\n")


# -- a rank's children that leave the process group -----------------------------------------
@pytest.mark.parametrize(("mode", "end", "stop", "code"), [
    ("escape_session", "ok", None, 0),
    ("escape_session", "fail", None, 1),
    ("escape_session", "wait", signal.SIGINT, 130),
    ("escape_setsid", "ok", None, 0),
    ("escape_setsid", "fail", None, 1),
    ("escape_setsid", "wait", signal.SIGINT, 130),
])
def test_nothing_a_rank_started_outlives_the_job(tmp_path: Path, mode: str, end: str, stop: int | None,
                                                  code: int) -> None:
    """start_new_session=True (a new session, the job's cookie kept) and a daemon made by
    fork/setsid/fork with an empty environment (no cookie: the subreaper finds it)."""
    t0 = time.monotonic()
    proc, run_dir, state_dir = launch(tmp_path, "--grace", "2", mode=mode, end=end)
    if stop is not None:
        wait_for([state_dir / "rank0.0.json", state_dir / "rank1.0.json"], proc)
        proc.send_signal(stop)
    run = finish(proc, run_dir, state_dir, t0)
    assert run.returncode == code, run.explain()
    escaped = [pid for r in (0, 1) for pid in record(state_dir, r)["started"]]
    assert len(escaped) == 2
    assert survivors(escaped, 2.0) == [], f"outlived the job: {escaped} ({mode}, end {end})"
    assert survivors(rank_pids(state_dir), 2.0) == []


def test_watchdog_ends_the_mlflow_run_a_supervisor_died_before_ending(sqlite_uri: str, tmp_path: Path) -> None:
    """The supervisor wrote its final status.json, then died while ending the MLflow run (a slow
    server, a SIGKILL): its watchdog, which is `distcomp reap` holding the folder's lock, ends
    the run as the job ended, with the logs. Here the watchdog's part is played directly."""
    from mlflow import MlflowClient

    client = MlflowClient(sqlite_uri)
    run = client.create_run(client.create_experiment("died-late"))
    run_dir = tmp_path / "run"
    (run_dir / "logs").mkdir(parents=True)
    (run_dir / "logs" / "rank0.log").write_text("=== attempt 1: worker 0 on node 0: python train.py\ndone\n")
    (run_dir / "status.json").write_text(json.dumps({
        "state": "succeeded", "exit_code": 0, "message": "", "cookie": "c00k1e", "incomplete_outputs": {},
        "mlflow": {"run_id": run.info.run_id, "tracking_uri": sqlite_uri}}))
    lock = os.open(run_dir / ".distcomp.lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(lock, fcntl.LOCK_EX)
    from distcomp.core.jobrecord import JobRecord, write_record

    # the watchdog's own job record, as its claim writes it (distcomp.worker, not CLI flags)
    record = write_record(run_dir / ".distcomp.reap.json", JobRecord(
        "reap", options={"run_dir": str(run_dir), "lock_fd": lock, "cookie": "c00k1e", "grace": 5.0}))
    try:
        proc = subprocess.run([sys.executable, "-m", "distcomp.worker", str(record)], pass_fds=(lock,),
                              env=clean_env(), capture_output=True, text=True, timeout=WAIT)
    finally:
        os.close(lock)
    assert proc.returncode == 0, proc.stderr
    assert not record.exists()  # single-use: the reap that read it removed it
    assert proc.stdout == (f"distcomp reap: {run_dir}: the supervisor died after the job succeeded; "
                           f"MLflow run {run.info.run_id}: FINISHED\n")
    ended = client.get_run(run.info.run_id)
    assert (ended.info.status, ended.data.tags["distcomp.state"]) == ("FINISHED", "succeeded")
    assert "distcomp.failure" not in ended.data.tags
    assert "logs/rank0.log" in artifacts(sqlite_uri, run.info.run_id)
    assert status(run_dir)["state"] == "succeeded"  # the job's own record stands


# -- what left the job's process tree and cleared its environment, after the supervisor died --
def _escaped(state_dir: Path) -> list[int]:
    return [pid for r in (0, 1) for pid in record(state_dir, r)["started"]]


def _started_escaping(tmp_path: Path, cgroup: bool) -> tuple[subprocess.Popen[str], Path, list[int], list[int]]:
    """A job whose ranks each left a daemon with no cookie, with a cgroup or without (then once
    the watchdog has noted the daemons the supervisor adopted)."""
    proc, run_dir, state_dir = launch(tmp_path, "--grace", "2", mode="escape_setsid", end="wait",
                                      env=None if cgroup else {"DISTCOMP_CGROUP": "off"})
    wait_for([state_dir / "rank0.0.json", state_dir / "rank1.0.json"], proc)
    escaped, ranks = _escaped(state_dir), rank_pids(state_dir)
    assert len(escaped) == 2 and all(running(p) for p in escaped)
    path = status(run_dir)["cgroup"]
    if cgroup:
        assert path and Path(path).is_dir(), path
        assert all(f"/{Path(path).name}\n" in Path(f"/proc/{p}/cgroup").read_text() for p in escaped)
    else:
        assert path is None
        _wait_noted(run_dir, escaped)
    return proc, run_dir, escaped, ranks


def _wait_noted(run_dir: Path, pids: list[int]) -> None:
    """Until the watchdog has noted ``pids`` as adopted by the supervisor (a job without a cgroup)."""
    note = run_dir / ".distcomp.adopted"
    deadline = time.monotonic() + WAIT
    while not (note.exists() and {int(line.split()[0]) for line in note.read_text().splitlines()} >= set(pids)):
        assert time.monotonic() < deadline, "the watchdog never noted the daemons"
        time.sleep(0.05)


@pytest.mark.parametrize("cgroup", [WITH_CGROUP, pytest.param(False, id="no-cgroup")])
def test_sigkill_of_distcomp_run_stops_a_double_forked_child_with_an_empty_environment(tmp_path: Path,
                                                                                        cgroup: bool) -> None:
    """A rank's daemon (fork, setsid, fork, exec with an empty environment: no cookie) is held by
    the job's cgroup, or else noted by the watchdog as the supervisor adopts it: when `distcomp
    run` is SIGKILLed the watchdog stops it with the ranks, and status.json says what it did."""
    proc, run_dir, escaped, ranks = _started_escaping(tmp_path, cgroup)
    path = status(run_dir)["cgroup"]
    proc.kill()
    proc.communicate(timeout=WAIT)
    assert survivors(escaped + ranks) == [], "a process of the job outlived its supervisor"
    final = status(run_dir)
    assert final["message"] == (f"the supervisor (pid {proc.pid} on host {HOST}) died; its watchdog stopped every "
                                "rank (4 process(es) were still running)" + ("" if cgroup else NO_CGROUP)), final
    assert not (path and Path(path).exists())  # removed once empty
    assert not (run_dir / ".distcomp.adopted").exists()


@pytest.mark.parametrize("cgroup", [WITH_CGROUP, pytest.param(False, id="no-cgroup")])
def test_reap_stops_a_double_forked_child_with_an_empty_environment(tmp_path: Path, cgroup: bool) -> None:
    """Supervisor and watchdog both SIGKILLed: the daemons are orphans of PID 1 with no cookie;
    `distcomp reap` still finds them, through the job's cgroup or the watchdog's note."""
    proc, run_dir, escaped, ranks = _started_escaping(tmp_path, cgroup)
    watchdog = status(run_dir)["supervisor"]["watchdog_pid"]
    os.kill(watchdog, signal.SIGKILL)
    assert survivors([watchdog], 5) == []
    proc.kill()
    proc.communicate(timeout=WAIT)
    assert all(running(p) and psutil.Process(p).ppid() == 1 for p in escaped), "not the case under test"
    assert all(b"DISTCOMP_JOB_COOKIE" not in Path(f"/proc/{p}/environ").read_bytes() for p in escaped)

    reap = subprocess.run([sys.executable, "-m", "distcomp", "reap", "--grace", "2", str(run_dir)], cwd=tmp_path,
                          env=clean_env(), capture_output=True, text=True, timeout=WAIT)
    assert reap.returncode == 0, reap.stderr
    assert survivors(escaped + ranks, 5) == [], reap.stdout
    assert status(run_dir)["message"] == (f"the supervisor (pid {proc.pid} on host {HOST}) died; distcomp reap "
                                          "stopped every rank (4 process(es) were still running)"
                                          + ("" if cgroup else NO_CGROUP))


SUBMIT = "import json, sys, distcomp\nprint(distcomp.submit(sys.argv[1], 'local', **json.loads(sys.argv[2])))\n"


def _ticks(text: str) -> list[int]:
    return [int(n) for n in re.findall(r"^\[rank0\.own\] tick (\d+)$", text, re.MULTILINE)]


@pytest.mark.slow
def test_cancel_and_logs_follow_of_a_detached_job_whose_supervisor_and_watchdog_died(sqlite_uri: str,
                                                                                       tmp_path: Path) -> None:
    """`distcomp cancel` stops what the job left (its ranks, and a daemon with no cookie, through
    the job's cgroup), ends the MLflow run KILLED and writes the final status.json; `distcomp logs
    --follow` started after the supervisor died follows the ranks' lines until cancel ends them."""
    from tests.targets._supervised import SUPERVISION

    run_dir, state_dir = tmp_path / "runs" / "orphaned", tmp_path / "state"
    env = clean_env(MLFLOW_TRACKING_URI=sqlite_uri)
    # no node monitor: it leaves by itself once the supervisor is gone, so counting it is a race
    options = {"run_dir": str(run_dir), "grace": 2.0, "system_metrics": False,
               "inputs": {"mode": "scribe", "state_dir": str(state_dir)}}
    submitted = subprocess.run([sys.executable, "-c", SUBMIT, str(SUPERVISION), json.dumps(options)], env=env,
                               cwd=tmp_path, capture_output=True, text=True, timeout=WAIT)
    assert submitted.returncode == 0, submitted.stderr
    job = submitted.stdout.strip()
    assert job == f"local:{run_dir}"
    wait_for([state_dir / "rank0.0.json", state_dir / "rank1.0.json"])
    if not status(run_dir)["cgroup"]:  # a machine without cgroup rights: the watchdog's note finds the daemons
        _wait_noted(run_dir, _escaped(state_dir))
    sup = status(run_dir)["supervisor"]
    for pid in (sup["watchdog_pid"], sup["pid"]):  # the watchdog first, so it cannot act
        os.kill(pid, signal.SIGKILL)
        assert survivors([pid], 5) == []
    ranks, escaped = rank_pids(state_dir), _escaped(state_dir)
    assert all(running(p) for p in ranks + escaped), "nothing was left: the test is not testing cancel"
    own = run_dir / "logs" / "rank0.own.log"
    written = len(own.read_text().splitlines())  # ticks written before following starts

    def cli(*args: str) -> subprocess.Popen[str]:
        return subprocess.Popen([sys.executable, "-m", "distcomp", *args], env=clean_env(), cwd=tmp_path,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    follow = cli("logs", job, "--follow")
    deadline = time.monotonic() + WAIT
    while len(own.read_text().splitlines()) < written + 10:  # a second of ticks, the supervisor long dead
        assert time.monotonic() < deadline
        time.sleep(0.1)
    assert follow.poll() is None, "logs --follow stopped while the job's ranks still wrote"

    cancel = cli("cancel", job)
    out, err = cancel.communicate(timeout=WAIT)
    assert cancel.returncode == 0, err
    assert out.startswith(f"{job}: cancelled"), out
    assert survivors(ranks + escaped, 5) == []
    followed, follow_err = follow.communicate(timeout=WAIT)  # it ends once the ranks are gone
    assert follow.returncode == 0, follow_err
    ticks = _ticks(followed)
    assert ticks == list(range(len(ticks))) and ticks[-1] >= written + 9, followed[-500:]

    final = status(run_dir)
    message = (f"cancelled: the supervisor (pid {sup['pid']} on host {HOST}) died; distcomp cancel stopped every "
               f"rank (4 process(es) were still running){no_cgroup(run_dir)}")
    assert (final["state"], final["exit_code"], final["message"]) == ("cancelled", 143, message), final
    assert final["reaped"]["by"] == "distcomp cancel"
    run = mlflow_run(sqlite_uri, final["mlflow"]["run_id"])
    assert (run.info.status, run.data.tags["distcomp.state"]) == ("KILLED", "cancelled")
    assert "logs/rank0.own.log" in artifacts(sqlite_uri, final["mlflow"]["run_id"])
    again = cli("cancel", job)  # an ended job is left as it is
    assert again.communicate(timeout=WAIT)[0].startswith(f"{job}: cancelled") and again.returncode == 0


def test_cancel_of_a_job_it_cannot_stop_exits_1_saying_why(tmp_path: Path) -> None:
    """A job of another host whose supervisor is gone: its processes are out of reach from here."""
    remote = running_record(tmp_path, "remote", pid=2 ** 22 + 1, host="elsewhere.example", start_time=1)
    proc = subprocess.run([sys.executable, "-m", "distcomp", "cancel", f"local:{remote}"], cwd=tmp_path,
                          env=clean_env(), capture_output=True, text=True, timeout=WAIT)
    assert (proc.returncode, proc.stdout) == (1, ""), proc.stderr
    assert proc.stderr.strip().endswith(
        f"cannot cancel local:{remote}: job remote runs on host elsewhere.example (pid {2 ** 22 + 1}): it cannot be "
        f"checked from {HOST}; run distcomp reap on elsewhere.example, or give --force to mark it failed from here")
    assert "Traceback" not in proc.stderr and status(remote)["state"] == "running"


def test_a_look_for_a_jobs_processes_skips_those_older_than_its_supervisor() -> None:
    """``job_processes(since=...)``: the supervisor's own start time bounds the look (a process
    of the job starts after it), so an older process is not read, cookie or not."""
    from distcomp.targets.local import _procs

    cookie = os.urandom(8).hex()
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                            env={**os.environ, _procs.COOKIE: cookie})
    try:
        started = _procs.start_time(proc.pid)
        assert started is not None
        deadline = time.monotonic() + 10  # a process just started may not show its new environment yet
        while proc.pid not in _procs.job_processes(cookie) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert proc.pid in _procs.job_processes(cookie)
        assert proc.pid in _procs.job_processes(cookie, since=started)
        assert proc.pid not in _procs.job_processes(cookie, since=started + 1)
        assert proc.pid not in _procs.job_processes(cookie, roots={os.getpid()}, since=started + 1)  # nor by descent
    finally:
        proc.kill()
        proc.wait()
