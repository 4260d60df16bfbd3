"""The local target when things go wrong: a rank that fails, is killed, hangs, ignores
SIGTERM, leaves a grandchild behind, or a user who interrupts the job. Every case runs the
real ``distcomp run`` on jobs/fault (torch.distributed launcher, 2 ranks) and checks the exit
code, the root-cause report, status.json, the rank logs, and that no process survives."""

from __future__ import annotations

import re
import signal
import time
from pathlib import Path

import pytest

from tests.targets._jobs import Run, assert_no_survivors, finish, run_fault, start, wait_for

HEADER = [
    "distcomp run: fault-job@0.1.0: torch.distributed, 1 node(s) x 2 process(es), world size 2 (2 worker)",
    "distcomp run: run folder job-run (logs in job-run/logs)",
]


def lines_re(lines: list[str]) -> str:
    return "".join(re.escape(line) + "\n" for line in lines)


def report_re(log: Path, name: str, pid: int, how: str, tail: list[str], lead: str = "job failed") -> str:
    """The root-cause report, as a regex (only the time varies)."""
    return (rf"distcomp run: {lead}: {name} \(worker, node 0, pid {pid}\) {re.escape(how)} after \d+\.\d s\n"
            rf"  last lines of {re.escape(str(log))}:\n" + "".join(rf"    {re.escape(t)}\n" for t in tail))


STOPPED = "the other processes were stopped; logs in job-run/logs\n"


def argv_line(run: Run, mode: str) -> str:
    """The command every rank of the fault job runs, as its log header shows it."""
    return (f"python rank.py --mode {mode} --bad-rank 1 --state-dir {run.state_dir} --torch False "
            f"--result {run.run_dir / 'outputs' / 'result'}")


# -- a rank fails ---------------------------------------------------------------------------
def test_failing_rank_ends_job_with_root_cause_report(tmp_path: Path) -> None:
    # --grace 30: rank0 must go at the SIGTERM, not after the grace period
    run = run_fault(tmp_path, "--grace", "30", mode="exit")
    assert run.returncode == 1, run.explain()
    pid = run.record(1)["pid"]
    log = run.run_dir / "logs" / "rank1.log"
    tail = [f"rank 1 of 2 started (attempt 0, pid {pid})", "rank 1: disk full, giving up"]
    assert re.fullmatch(lines_re(HEADER) + report_re(log, "rank1", pid, "exited with code 3", tail) + STOPPED,
                        run.stderr), run.explain()
    assert "Traceback" not in run.stderr

    # rank0 would sleep 60 s: the failure ended it at once
    assert run.elapsed < 10, run.explain()
    assert "slept 60 s" not in run.log("rank0")
    assert run.console("rank1") == tail

    assert run.log("rank1") == "\n".join([f"=== attempt 1: worker 1 on node 0: {argv_line(run, 'exit')}",
                                          *tail]) + "\n"
    assert run.log("rank0") == (f"=== attempt 1: worker 0 on node 0: {argv_line(run, 'exit')}\n"
                                f"rank 0 of 2 started (attempt 0, pid {run.record(0)['pid']})\n")

    status = run.status
    assert (status["state"], status["exit_code"], status["attempts"]) == ("failed", 1, 1)
    assert status["failures"] == [] and status["signal"] is None
    cause = status["root_cause"]
    assert (cause["name"], cause["role"], cause["node"], cause["returncode"], cause["pid"]) == \
        ("rank1", "worker", 0, 3, pid)
    assert cause["tail"] == tail and cause["log"] == str(log)
    assert 0 < cause["after"] < status["wall_s"]
    by_name = {p["name"]: p for p in status["processes"]}
    assert sorted(by_name) == ["rank0", "rank1"]
    assert by_name["rank1"]["returncode"] == 3 and by_name["rank1"]["pid"] == pid
    assert by_name["rank0"]["pid"] == run.record(0)["pid"]
    assert_no_survivors(run.state_dir, 2)


def test_status_marks_ranks_that_were_stopped_as_not_having_ended(tmp_path: Path) -> None:
    """ProcessResult.returncode: None means 'still running when the job ended (it was then
    killed)'. rank0 was stopped because rank1 failed: its record must say so, not pass the
    SIGTERM distcomp itself sent off as rank0's own exit."""
    run = run_fault(tmp_path, "--grace", "5", mode="exit")
    assert run.returncode == 1, run.explain()
    codes = {p["name"]: p["returncode"] for p in run.status["processes"]}
    assert codes == {"rank0": None, "rank1": 3}


@pytest.mark.slow
def test_failing_torch_rank_after_init_process_group(tmp_path: Path) -> None:
    """The same with real gloo ranks: both join the group and all-reduce, then rank1 fails."""
    run = run_fault(tmp_path, "--grace", "30", mode="exit", use_torch="true")
    assert run.returncode == 1, run.explain()
    pid = run.record(1)["pid"]
    for r in (0, 1):
        assert f"rank {r}: all_reduce over 2 ranks gave 3" in run.log(f"rank{r}"), run.explain()
    m = re.search(r"distcomp run: job failed: rank1 \(worker, node 0, pid (\d+)\) exited with code 3 after "
                  r"\d+\.\d s\n  last lines of (.*):\n((?:    .*\n)+)" + re.escape(STOPPED) + r"\Z", run.stderr)
    assert m, run.explain()
    assert int(m.group(1)) == pid and m.group(2) == str(run.run_dir / "logs" / "rank1.log")
    tail = [line[4:] for line in m.group(3).splitlines()]
    assert tail[-3:] == ["rank 1: all_reduce over 2 ranks gave 3", f"rank 1 of 2 started (attempt 0, pid {pid})",
                         "rank 1: disk full, giving up"]
    assert "slept 60 s" not in run.log("rank0")
    assert run.elapsed < 30
    assert_no_survivors(run.state_dir, 2)


def test_killed_rank_is_reported_with_its_signal(tmp_path: Path) -> None:
    run = run_fault(tmp_path, "--grace", "30", mode="kill")
    assert run.returncode == 1, run.explain()
    pid = run.record(1)["pid"]
    tail = [f"rank 1 of 2 started (attempt 0, pid {pid})", "rank 1: about to be killed"]
    log = run.run_dir / "logs" / "rank1.log"
    assert re.fullmatch(lines_re(HEADER) + report_re(log, "rank1", pid, "was killed by signal 9 (SIGKILL)", tail)
                        + STOPPED, run.stderr), run.explain()
    cause = run.status["root_cause"]
    assert (cause["name"], cause["returncode"], cause["pid"]) == ("rank1", -9, pid)
    assert run.elapsed < 10
    assert_no_survivors(run.state_dir, 2)


# -- timeout ------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize(("mode", "timeout", "shown", "still"), [
    ("hang", "3", "3", "rank1"),  # rank0 finished; only the hanging rank is left to stop
    ("sleep", "2.5", "2.5", "rank0, rank1"),
])
def test_timeout_stops_the_job(tmp_path: Path, mode: str, timeout: str, shown: str, still: str) -> None:
    run = run_fault(tmp_path, "--timeout", timeout, "--grace", "1", mode=mode)
    assert run.returncode == 124, run.explain()
    message = f"job timed out after {shown} s (--timeout); stopped what was still running: {still}"
    assert run.stderr == "".join(line + "\n" for line in HEADER) + f"distcomp run: {message}\n"
    assert float(timeout) <= run.elapsed < float(timeout) + 8, run.explain()
    status = run.status
    assert (status["state"], status["exit_code"], status["message"]) == ("timed_out", 124, message)
    assert status["root_cause"] is None and status["attempts"] == 1
    assert status["wall_s"] >= float(timeout)
    assert "slept 60 s" not in run.log("rank1")
    if mode == "hang":
        assert run.log("rank1").endswith("rank 1: hanging\n")
        assert {p["name"]: p["returncode"] for p in status["processes"]}["rank0"] == 0
    assert_no_survivors(run.state_dir, 2)


# -- the user stops distcomp -------------------------------------------------------------
@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130)])  # SIGTERM is a preemption: test_long_jobs.py
def test_signal_to_distcomp_stops_every_rank(tmp_path: Path, sig: signal.Signals, code: int) -> None:
    t0 = time.monotonic()
    proc, run_dir, state_dir = start(tmp_path, "--grace", "30", mode="sleep")
    wait_for([state_dir / "rank0.0.json", state_dir / "rank1.0.json"], proc)
    sent = time.monotonic()
    proc.send_signal(sig)
    run = finish(proc, run_dir, state_dir, t0)
    assert run.returncode == code, run.explain()
    assert time.monotonic() - sent < 10, "the ranks die at SIGTERM: no need to wait for the grace period"
    message = f"interrupted by signal {int(sig)} ({sig.name}); every rank was stopped"
    assert run.stderr.endswith(f"distcomp run: {message}\n"), run.explain()
    assert "Traceback" not in run.stderr
    status = run.status
    assert (status["state"], status["exit_code"], status["signal"], status["message"]) == \
        ("cancelled", code, int(sig), message)
    for r in (0, 1):
        assert "slept 60 s" not in run.log(f"rank{r}")
    assert_no_survivors(state_dir, 2)


@pytest.mark.slow
def test_second_sigint_skips_the_grace_period(tmp_path: Path) -> None:
    """Ranks that ignore SIGTERM would get 30 s; a second Ctrl-C kills them now."""
    t0 = time.monotonic()
    proc, run_dir, state_dir = start(tmp_path, "--grace", "30", mode="ignore_term", bad_rank=99)
    wait_for([state_dir / "rank0.0.json", state_dir / "rank1.0.json"], proc)
    proc.send_signal(signal.SIGINT)
    wait_for([state_dir / "rank0.term", state_dir / "rank1.term"], proc)  # they got SIGTERM, and ignore it
    time.sleep(0.3)
    assert proc.poll() is None, "distcomp must wait for the grace period after one SIGINT"
    second = time.monotonic()
    proc.send_signal(signal.SIGINT)
    run = finish(proc, run_dir, state_dir, t0)
    assert run.returncode == 130, run.explain()
    assert time.monotonic() - second < 8, run.explain()
    for r in (0, 1):
        assert f"rank {r} got SIGTERM and ignores it" in run.log(f"rank{r}")
    assert run.status["state"] == "cancelled"
    assert_no_survivors(state_dir, 2)


# -- SIGTERM is not enough ---------------------------------------------------------------
@pytest.mark.slow
def test_rank_ignoring_sigterm_is_killed_after_grace(tmp_path: Path) -> None:
    run = run_fault(tmp_path, "--grace", "1", mode="ignore_term")
    assert run.returncode == 1, run.explain()
    assert "rank 0 got SIGTERM and ignores it" in run.log("rank0"), run.explain()
    assert "slept 60 s" not in run.log("rank0")
    status = run.status
    cause = status["root_cause"]
    assert (cause["name"], cause["returncode"]) == ("rank1", 3)
    assert "job failed: rank1 (worker, node 0, pid" in run.stderr and "exited with code 3" in run.stderr
    # the grace period was given in full, then SIGKILL: about 1 s, not 60
    assert status["wall_s"] >= cause["after"] + 0.95, status
    assert run.elapsed < 10, run.explain()
    assert_no_survivors(run.state_dir, 2)


# -- restarts ------------------------------------------------------------------------------
def test_max_restarts_recovers_from_one_failure(tmp_path: Path) -> None:
    run = run_fault(tmp_path, "--max-restarts", "1", "--grace", "2", mode="flaky")
    assert run.returncode == 0, run.explain()
    first = run.record(1, 0)["pid"]
    log = run.run_dir / "logs" / "rank1.log"
    tail = [f"rank 1 of 2 started (attempt 0, pid {first})", "rank 1: flaky failure on attempt 0"]
    expected = (lines_re(HEADER)
                + report_re(log, "rank1", first, "exited with code 5", tail, lead="attempt 1 failed")
                + re.escape("restarting every rank (restart 1 of 1)\n")
                + r"distcomp run: succeeded in \d+\.\d s after 1 restart\(s\); outputs: result=job-run/outputs/result\n")
    assert re.fullmatch(expected, run.stderr), run.explain()

    status = run.status
    assert (status["state"], status["exit_code"], status["attempts"]) == ("succeeded", 0, 2)
    assert status["root_cause"] is None
    [failure] = status["failures"]
    assert (failure["name"], failure["returncode"], failure["pid"], failure["tail"]) == ("rank1", 5, first, tail)
    assert [p["returncode"] for p in status["processes"]] == [0, 0]
    assert {p["pid"] for p in status["processes"]} == {run.record(0, 1)["pid"], run.record(1, 1)["pid"]}

    # one log per rank across attempts, each attempt under its own header
    second = run.record(1, 1)["pid"]
    assert run.log("rank1") == "\n".join([
        f"=== attempt 1: worker 1 on node 0: {argv_line(run, 'flaky')}", *tail,
        f"=== attempt 2: worker 1 on node 0: {argv_line(run, 'flaky')}",
        f"rank 1 of 2 started (attempt 1, pid {second})", "rank 1: recovered on attempt 1"]) + "\n"
    assert run.log("rank0").count("=== attempt ") == 2 and "=== attempt 2: worker 0 on node 0: " in run.log("rank0")

    # each attempt is a fresh set of processes, told which restart this is, on a fresh port
    for attempt in (0, 1):
        envs = [run.record(r, attempt)["env"] for r in (0, 1)]
        assert [e["TORCHELASTIC_RESTART_COUNT"] for e in envs] == [str(attempt)] * 2
        assert [e["TORCHELASTIC_MAX_RESTARTS"] for e in envs] == ["1", "1"]
        assert envs[0]["MASTER_PORT"] == envs[1]["MASTER_PORT"]
    assert run.record(0, 0)["env"]["MASTER_PORT"] != run.record(0, 1)["env"]["MASTER_PORT"]
    assert_no_survivors(run.state_dir, 4)


def test_max_restarts_gives_up_after_the_last_attempt(tmp_path: Path) -> None:
    run = run_fault(tmp_path, "--max-restarts", "1", "--grace", "2", mode="always_fail")
    assert run.returncode == 1, run.explain()
    first, second = run.record(1, 0)["pid"], run.record(1, 1)["pid"]
    log = run.run_dir / "logs" / "rank1.log"
    expected = (lines_re(HEADER)
                + report_re(log, "rank1", first, "exited with code 4",
                            [f"rank 1 of 2 started (attempt 0, pid {first})", "rank 1: failing on attempt 0"],
                            lead="attempt 1 failed")
                + re.escape("restarting every rank (restart 1 of 1)\n")
                + report_re(log, "rank1", second, "exited with code 4",
                            [f"rank 1 of 2 started (attempt 1, pid {second})", "rank 1: failing on attempt 1"])
                + STOPPED)
    assert re.fullmatch(expected, run.stderr), run.explain()
    status = run.status
    assert (status["state"], status["exit_code"], status["attempts"]) == ("failed", 1, 2)
    assert [f["pid"] for f in status["failures"]] == [first]
    assert (status["root_cause"]["pid"], status["root_cause"]["returncode"]) == (second, 4)
    assert not (run.state_dir / "rank1.2.json").exists()  # no third attempt
    assert run.log("rank1").count("rank 1: failing on attempt") == 2
    assert_no_survivors(run.state_dir, 4)


# -- what a rank started --------------------------------------------------------------------
def test_grandchild_of_failed_rank_does_not_survive(tmp_path: Path) -> None:
    run = run_fault(tmp_path, "--grace", "5", mode="grandchild")
    assert run.returncode == 1, run.explain()
    grandchild = run.record(1)["grandchild"]
    assert grandchild and f"rank 1: failing, leaving sleep {grandchild} behind" in run.log("rank1")
    assert run.status["root_cause"]["name"] == "rank1"
    # it held rank1's stdout open: the job must not have waited for it (60 s)
    assert run.elapsed < 10, run.explain()
    pids = assert_no_survivors(run.state_dir, 3)
    assert pids["rank1.0/grandchild"] == grandchild


@pytest.mark.slow
def test_grandchild_ignoring_sigterm_of_hung_rank_is_killed(tmp_path: Path) -> None:
    run = run_fault(tmp_path, "--timeout", "2", "--grace", "1", mode="grandchild_hang")
    assert run.returncode == 124, run.explain()
    assert "stopped what was still running: rank1" in run.stderr
    assert run.elapsed < 12, run.explain()
    assert_no_survivors(run.state_dir, 3)


# -- jobs side by side ------------------------------------------------------------------------
@pytest.mark.slow
def test_two_torch_jobs_side_by_side(tmp_path: Path) -> None:
    """Each job gets its own free MASTER_PORT; both rendezvous and all-reduce at once."""
    t0 = time.monotonic()
    started = [start(tmp_path, "--grace", "2", "--timeout", "120", name=name, mode="ok", use_torch="true")
               for name in ("a", "b")]
    runs = [finish(*s, t0) for s in started]
    ports = []
    for run in runs:
        assert run.returncode == 0, run.explain()
        assert run.status["state"] == "succeeded"
        for r in (0, 1):
            assert f"rank {r}: all_reduce over 2 ranks gave 3" in run.console(f"rank{r}")
        env0, env1 = run.record(0)["env"], run.record(1)["env"]
        assert env0["MASTER_PORT"] == env1["MASTER_PORT"]
        assert env0["TORCHELASTIC_RUN_ID"] == run.run_dir.name
        ports.append(env0["MASTER_PORT"])
        assert (run.run_dir / "outputs" / "result" / "done.txt").read_text() == "ok\n"
        assert_no_survivors(run.state_dir, 2)
    assert ports[0] != ports[1]


# -- output that is not clean text ------------------------------------------------------------
def test_unterminated_and_non_utf8_output_is_kept(tmp_path: Path) -> None:
    run = run_fault(tmp_path, "--grace", "5", mode="bytes")
    assert run.returncode == 1, run.explain()
    pid = run.record(1)["pid"]
    # the log keeps the bytes as written; a last line without newline is ended for it
    assert run.log_bytes("rank1").endswith(
        f"rank 1 of 2 started (attempt 0, pid {pid})\n".encode()
        + b"caf\xe9 latin-1 \xff\xfe bytes\nlast words without newline \xc3\xa9t\xe9\n")
    # rank0 was stopped in the middle of a line: that line is not lost either
    assert run.log_bytes("rank0").endswith(b"partial line of rank 0 \x80\n")
    # the console and the report show them as text
    assert run.console("rank1")[-2:] == ["caf\ufffd latin-1 \ufffd\ufffd bytes",
                                         "last words without newline \u00e9t\ufffd"]
    assert run.console("rank0")[-1] == "partial line of rank 0 \ufffd"
    log = run.run_dir / "logs" / "rank1.log"
    tail = [f"rank 1 of 2 started (attempt 0, pid {pid})", "caf\ufffd latin-1 \ufffd\ufffd bytes",
            "last words without newline \u00e9t\ufffd"]
    assert re.fullmatch(lines_re(HEADER) + report_re(log, "rank1", pid, "exited with code 7", tail) + STOPPED,
                        run.stderr), run.explain()
    assert_no_survivors(run.state_dir, 2)
