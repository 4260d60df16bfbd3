"""``distcomp run`` as a user meets it: the launcher's contract on a good run, --nodes and
--nproc-per-node, --quiet, a console that goes away, and every way a command line or spec
can be wrong — each of those stops before anything is created or started."""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path

import pytest

from tests.targets._jobs import FAULT, JOBS, WAIT, assert_no_survivors, clean_env, distcomp_argv, run_fault, start

SUCCEEDED = r"distcomp run: succeeded in \d+\.\d s; outputs: result=job-run/outputs/result\n"


def header(nodes: int = 1, per_node: int = 2) -> str:
    world = nodes * per_node
    return (f"distcomp run: fault-job@0.1.0: torch.distributed, {nodes} node(s) x {per_node} process(es), "
            f"world size {world} ({world} worker)\n"
            "distcomp run: run folder job-run (logs in job-run/logs)\n")


def test_good_run_gives_every_rank_the_torchrun_contract(tmp_path: Path) -> None:
    run = run_fault(tmp_path, mode="ok")
    assert run.returncode == 0, run.explain()
    assert re.fullmatch(re.escape(header()) + SUCCEEDED, run.stderr), run.explain()
    # rank output, and only rank output, on stdout, each line under its rank's prefix
    assert sorted(run.stdout.splitlines()) == [
        f"[rank{r}]: rank {r} of 2 started (attempt 0, pid {run.record(r)['pid']})" for r in (0, 1)]
    status = run.status
    assert (status["state"], status["exit_code"], status["attempts"], status["root_cause"]) == ("succeeded", 0, 1, None)
    assert [(p["name"], p["returncode"]) for p in status["processes"]] == [("rank0", 0), ("rank1", 0)]
    assert status["outputs"] == {"result": str(run.run_dir / "outputs" / "result")}
    assert (run.run_dir / "outputs" / "result" / "done.txt").read_text() == "ok\n"

    port = run.record(0)["env"]["MASTER_PORT"]
    assert 1024 <= int(port) < 65536
    for r in (0, 1):
        rec = run.record(r)
        assert rec["cwd"] == str(JOBS / "fault")  # the spec's folder
        assert rec["env"] == {
            "RANK": str(r), "LOCAL_RANK": str(r), "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "2",
            "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port, "GROUP_RANK": "0", "NODE_RANK": "0",
            "GROUP_WORLD_SIZE": "1", "ROLE_RANK": str(r), "ROLE_WORLD_SIZE": "2",
            "TORCHELASTIC_RESTART_COUNT": "0", "TORCHELASTIC_MAX_RESTARTS": "0", "TORCHELASTIC_RUN_ID": "job-run",
            "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
        assert run.log(f"rank{r}").splitlines()[1:] == [f"rank {r} of 2 started (attempt 0, pid {rec['pid']})"]
    assert_no_survivors(run.state_dir, 2)


def test_nodes_and_nproc_per_node_override_the_spec(tmp_path: Path) -> None:
    run = run_fault(tmp_path, "--nodes", "2", "--nproc-per-node", "2", mode="ok")
    assert run.returncode == 0, run.explain()
    assert run.stderr.startswith(header(2, 2)), run.explain()
    envs = [run.record(r)["env"] for r in range(4)]
    assert [(e["RANK"], e["NODE_RANK"], e["LOCAL_RANK"]) for e in envs] == \
        [("0", "0", "0"), ("1", "0", "1"), ("2", "1", "0"), ("3", "1", "1")]
    assert {(e["WORLD_SIZE"], e["LOCAL_WORLD_SIZE"], e["GROUP_WORLD_SIZE"], e["MASTER_PORT"]) for e in envs} == \
        {("4", "2", "2", envs[0]["MASTER_PORT"])}
    assert sorted(p.name for p in (run.run_dir / "logs").iterdir()) == [f"rank{r}.log" for r in range(4)]
    assert run.log("rank3").startswith("=== attempt 1: worker 3 on node 1: python rank.py --mode ok ")
    assert_no_survivors(run.state_dir, 4)


# -- --quiet, and a console that goes away ---------------------------------------------------
def test_quiet_keeps_rank_output_off_the_console_but_in_the_logs(tmp_path: Path) -> None:
    run = run_fault(tmp_path, "--quiet", "--nproc-per-node", "3", "--grace", "5", mode="exit")
    assert run.returncode == 1, run.explain()
    assert run.stdout == ""
    pid = run.record(1)["pid"]
    for r in range(3):
        assert f"rank {r} of 3 started (attempt 0, pid {run.record(r)['pid']})\n" in run.log(f"rank{r}")
    assert run.log("rank1").endswith("rank 1: disk full, giving up\n")
    # the report is distcomp's own, not rank output: it still comes, with the last lines
    assert re.search(rf"distcomp run: job failed: rank1 \(worker, node 0, pid {pid}\) exited with code 3 after "
                     rf"\d+\.\d s\n  last lines of .*rank1\.log:\n    rank 1 of 3 started \(attempt 0, pid {pid}\)\n"
                     r"    rank 1: disk full, giving up\n", run.stderr), run.explain()
    assert_no_survivors(run.state_dir, 3)


def test_closed_console_does_not_stop_the_job(tmp_path: Path) -> None:
    """``distcomp run ... | head``: the reader goes away; the job runs on, the logs stay whole."""
    t0 = time.monotonic()
    proc, run_dir, state_dir = start(tmp_path, mode="chatty")
    assert proc.stdout is not None
    assert proc.stdout.readline().startswith("[rank")
    proc.stdout.close()
    try:
        err = proc.stderr.read() if proc.stderr else ""
        proc.wait(timeout=WAIT)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert "Traceback" not in err and "Exception ignored" not in err and "BrokenPipe" not in err, err
    assert re.search(SUCCEEDED, err), err
    for r in (0, 1):
        lines = (run_dir / "logs" / f"rank{r}.log").read_text().splitlines()
        assert len(lines) == 1 + 1 + 5000 and lines[-1] == f"rank {r} line 4999 " + "x" * 60
    assert time.monotonic() - t0 < WAIT
    assert_no_survivors(state_dir, 2)


# -- usage errors: nothing is created, nothing starts ------------------------------------------
STATE = ["-i", "state_dir=state"]
USAGE = [
    pytest.param([*STATE, "-i", "bad_rank=abc"], ["input 'bad_rank' must be an integer, got 'abc'"],
                 id="bad-input-type"),
    pytest.param([*STATE, "-i", "bad_rank=-1"], ["input 'bad_rank' must be >= 0, got -1"],
                 id="input-below-min"),
    pytest.param([*STATE, "-i", "mode=explode"],
                 ["input 'mode' must be one of: always_fail, bytes, chatty, exit, flaky, flood, grandchild, "
                  "grandchild_hang, hang, ignore_term, kill, ok, sleep; got 'explode'"], id="bad-enum"),
    pytest.param([*STATE, "-i", "nope=1"],
                 ["unknown input 'nope' (expected one of: mode, bad_rank, state_dir, use_torch, data)"],
                 id="unknown-input"),
    pytest.param([*STATE, "-o", "nope=elsewhere"], ["unknown output 'nope' (expected one of: result)"],
                 id="unknown-output"),
    pytest.param([*STATE, "-i", "data=missing"], ["input 'data': {tmp}/missing does not exist"],
                 id="missing-input-path"),
    pytest.param([*STATE, "-i", "data=file.txt"],
                 ["input 'data' is a folder (AnyDirectory), but {tmp}/file.txt is a file"], id="file-for-folder"),
    pytest.param([], ["missing required input 'state_dir' (give it with --input state_dir=VALUE)"],
                 id="missing-required-input"),
    pytest.param([*STATE, "-i", "mode"], ["--input 'mode': expected NAME=VALUE"], id="malformed-input"),
    pytest.param([*STATE, "-i", "mode=ok", "-i", "mode=sleep"], ["--input mode is given twice"], id="input-twice"),
    pytest.param([*STATE, "-o", "nope=x", "-i", "nope=1", "-i", "bad_rank=-1"],
                 ["unknown output 'nope' (expected one of: result)",
                  "  unknown input 'nope' (expected one of: mode, bad_rank, state_dir, use_torch, data)",
                  "  input 'bad_rank' must be >= 0, got -1"], id="every-problem-at-once"),
]


@pytest.mark.parametrize(("args", "expected"), USAGE)
def test_usage_error_exits_2_and_creates_nothing(tmp_path: Path, args: list[str], expected: list[str]) -> None:
    (tmp_path / "file.txt").write_text("not a folder\n")
    proc = subprocess.run(distcomp_argv(FAULT, "-o", "result=out", *args), cwd=tmp_path, env=clean_env(),
                          capture_output=True, text=True, timeout=WAIT)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr == "distcomp run: " + "\n".join(expected).replace("{tmp}", str(tmp_path)) + "\n"
    assert proc.stdout == ""
    # no runs/ folder, no output folder, no rank ran (state/ would exist)
    assert [p.name for p in tmp_path.iterdir()] == ["file.txt"]


@pytest.mark.parametrize(("flag", "value", "expected"), [
    ("--timeout", "0", "expected a number of seconds > 0, got '0'"),
    ("--timeout", "nan", "expected a number of seconds > 0, got 'nan'"),
    ("--grace", "-1", "expected a number of seconds >= 0, got '-1'"),
    ("--max-restarts", "-1", "expected an integer >= 0, got '-1'"),
    ("--nodes", "0", "expected an integer >= 1, got '0'"),
    ("--nproc-per-node", "two", "expected an integer >= 1, got 'two'"),
])
def test_bad_option_value_exits_2_and_creates_nothing(tmp_path: Path, flag: str, value: str, expected: str) -> None:
    proc = subprocess.run(distcomp_argv(FAULT, flag, value, *STATE), cwd=tmp_path, env=clean_env(),
                          capture_output=True, text=True, timeout=WAIT)
    assert proc.returncode == 2
    assert proc.stderr.startswith("usage: distcomp run ")
    assert proc.stderr.endswith(f"distcomp run: error: argument {flag}: {expected}\n")
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    assert list(tmp_path.iterdir()) == []


def test_usage_error_leaves_an_existing_run_dir_alone(tmp_path: Path) -> None:
    old = tmp_path / "old-run"
    (old / "logs").mkdir(parents=True)
    (old / "logs" / "rank0.log").write_text("yesterday's log\n")
    (old / "status.json").write_text('{"state": "succeeded"}\n')
    before = {p: p.read_bytes() for p in old.rglob("*") if p.is_file()}
    proc = subprocess.run(distcomp_argv(FAULT, "--run-dir", str(old), *STATE, "-i", "bad_rank=x"), cwd=tmp_path,
                          env=clean_env(), capture_output=True, text=True, timeout=WAIT)
    assert proc.returncode == 2 and "input 'bad_rank' must be an integer" in proc.stderr
    assert {p: p.read_bytes() for p in old.rglob("*") if p.is_file()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old-run"]


BAD_SPEC = """\
name: badspec
type: DistributedComponent
inputs:
  epochs:
    type: Integer
launcher:
  type: pytorc
  additional_arguments: python train.py --epochs {inputs.epoch}
"""


def test_invalid_spec_lists_every_error_and_starts_nothing(tmp_path: Path) -> None:
    spec = tmp_path / "spec" / "component.yaml"
    spec.parent.mkdir()
    spec.write_text(BAD_SPEC)
    proc = subprocess.run(distcomp_argv(spec), cwd=tmp_path, env=clean_env(), capture_output=True, text=True,
                          timeout=WAIT)
    assert proc.returncode == 2
    assert re.fullmatch(
        rf"distcomp run: {re.escape(str(spec))}:7:9: launcher\.type: unknown launcher 'pytorc' \(expected one of: "
        r"[^\n]*torch\.distributed[^\n]*\); did you mean 'pytorch'\?\n"
        rf"{re.escape(str(spec))}:8:50: launcher\.additional_arguments: reference to undeclared input 'epoch' "
        r"\(expected one of: epochs\); did you mean 'epochs'\?\n", proc.stderr), proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["spec"]


def test_missing_spec_file(tmp_path: Path) -> None:
    proc = subprocess.run(distcomp_argv(tmp_path / "nope.yaml"), cwd=tmp_path, env=clean_env(), capture_output=True,
                          text=True, timeout=WAIT)
    assert proc.returncode == 2
    assert proc.stderr == f"distcomp run: {tmp_path / 'nope.yaml'}:1:1: <file>: no such file (expected the path of a spec file)\n"
    assert list(tmp_path.iterdir()) == []


# -- a program that cannot start ---------------------------------------------------------------
def test_missing_program_is_named_without_traceback(tmp_path: Path) -> None:
    proc = subprocess.run(distcomp_argv(JOBS / "noprog" / "component.yaml", "--run-dir", str(tmp_path / "run")),
                          cwd=tmp_path, env=clean_env(), capture_output=True, text=True, timeout=WAIT)
    assert proc.returncode == 1
    assert proc.stderr == (
        "distcomp run: noprog@0.1.0: torch.distributed, 1 node(s) x 2 process(es), world size 2 (2 worker)\n"
        "distcomp run: run folder run (logs in run/logs)\n"
        "distcomp run: failed: cannot start 'no-such-program-xyz': No such file or directory "
        f"(command run in {JOBS / 'noprog'}; is it installed and on PATH?)\n")
    assert proc.stdout == ""


def test_program_that_is_not_executable_is_named(tmp_path: Path) -> None:
    code = tmp_path / "code"
    code.mkdir()
    (code / "train.sh").write_text("#!/bin/sh\necho hi\n")  # no x bit
    (code / "component.yaml").write_text(
        "name: notexec\ntype: DistributedComponent\nlauncher:\n  type: torch.distributed\n"
        "  process_count_per_node: 2\n  additional_arguments: ./train.sh\n")
    proc = subprocess.run(distcomp_argv(code / "component.yaml", "--run-dir", str(tmp_path / "run")),
                          cwd=tmp_path, env=clean_env(), capture_output=True, text=True, timeout=WAIT)
    assert proc.returncode == 1
    assert proc.stderr.endswith(f"distcomp run: failed: cannot start './train.sh': Permission denied "
                                f"(command run in {code}; is it installed and on PATH?)\n"), proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.slow
@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_log_that_cannot_be_written_is_reported_and_leaves_no_rank(tmp_path: Path) -> None:
    """The disk fills up while the job runs: rank1.log is /dev/full, where every write fails
    with ENOSPC, and rank1 prints a lot; every rank ignores SIGTERM. Whether distcomp then
    ends the job (exit 1) or runs it to its --timeout (exit 124), it must stop every rank,
    say what went wrong — not that `python` could not start — and not crash with a traceback."""
    run_dir = tmp_path / "job-run"
    (run_dir / "logs").mkdir(parents=True)
    (run_dir / "logs" / "rank1.log").symlink_to("/dev/full")
    run = run_fault(tmp_path, "--grace", "1", "--timeout", "6", mode="flood")
    # rank1's first lines already fail to land, so rank0 may be stopped before it records itself
    assert_no_survivors(run.state_dir, 2, at_least=1)
    assert run.returncode in (1, 124), run.explain()
    assert "Traceback" not in run.stderr, run.stderr
    assert "No space left on device" in run.stderr, run.stderr
    assert "cannot start" not in run.stderr and "is it installed and on PATH" not in run.stderr, run.stderr
    assert run.elapsed < 20, run.explain()
