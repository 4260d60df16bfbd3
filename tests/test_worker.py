"""The processes distcomp starts for itself read a versioned job record, never CLI flags
(``python -m distcomp.worker JOB.json``): a background local job is one, and a record written by
a newer distcomp is refused with a message that says what to do, before anything runs."""

from __future__ import annotations

import json
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

import distcomp
from distcomp.core.jobrecord import KEY, VERSION, JobRecord, bind_params, read_record, write_record

ECHO = ("import os, sys, time\nprint('rank', os.environ['RANK'], 'says', sys.argv[1], flush=True)\n"
        "time.sleep(float(os.environ.get('ECHO_SLEEP', '0')))\n")
SPEC = ("name: echo\ntype: DistributedComponent\ninputs:\n  msg: {type: String}\n"
        "launcher:\n  type: torch.distributed\n  process_count_per_node: 2\n"
        "  additional_arguments: python echo.py {inputs.msg}\n")


def _worker(record: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "distcomp.worker", str(record)], cwd=cwd, capture_output=True,
                          text=True, timeout=120)


@pytest.fixture
def spec(tmp_path: Path) -> Path:
    code = tmp_path / "code"
    code.mkdir()
    (code / "echo.py").write_text(ECHO)
    (code / "component.yaml").write_text(SPEC)
    return code / "component.yaml"


def test_a_run_record_runs_the_job_and_keeps_its_values_exact(spec: Path, tmp_path: Path) -> None:
    message = "it's $(two) words"
    record = write_record(tmp_path / "job.json", JobRecord(
        "run", str(spec), str(tmp_path), {"msg": message}, {}, {}, {"run_dir": str(tmp_path / "run"),
                                                                    "tracking": False}))
    assert stat.S_IMODE(record.stat().st_mode) == 0o600  # it may hold secrets: its owner's only
    done = _worker(record, tmp_path)
    assert done.returncode == 0, done.stderr
    assert f"[rank1]: rank 1 says {message}" in done.stdout
    status = json.loads((tmp_path / "run" / "status.json").read_text())
    assert status["state"] == "succeeded"


def test_a_record_of_a_newer_format_is_refused_before_anything_runs(spec: Path, tmp_path: Path) -> None:
    path = tmp_path / "job.json"
    path.write_text(json.dumps({KEY: VERSION + 1, "distcomp": "9.0.0", "action": "run", "spec": str(spec),
                                "options": {"run_dir": str(tmp_path / "run")}}))
    done = _worker(path, tmp_path)
    assert done.returncode == 2
    assert (f"a job record of format {VERSION + 1}, written by distcomp 9.0.0, is newer than this distcomp "
            f"{distcomp.__version__} reads (format {VERSION} and older): upgrade distcomp where the job runs") \
        in done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "run").exists()


def test_a_record_of_the_first_format_is_still_read(spec: Path, tmp_path: Path) -> None:
    """As the first distcomp to write records wrote them (no writer, no params): it runs."""
    path = tmp_path / "job.json"
    path.write_text(json.dumps({KEY: 1, "action": "run", "spec": str(spec), "cwd": str(tmp_path),
                                "inputs": {"msg": "old"}, "outputs": {}, "env": {},
                                "options": {"run_dir": str(tmp_path / "run"), "tracking": False}}))
    done = _worker(path, tmp_path)
    assert done.returncode == 0, done.stderr
    assert "[rank0]: rank 0 says old" in done.stdout


def test_a_record_is_written_in_the_lowest_format_that_holds_it() -> None:
    """So a KFP step compiled here still runs with an older distcomp in its image, unless it needs more."""
    assert JobRecord("run", "s.yaml", options={"nodes": 2}).to_json()[KEY] == 1
    assert JobRecord("run", "s.yaml", params={"msg": "value"}).to_json()[KEY] == 2
    assert JobRecord("submit", "s.yaml", target="local").to_json()[KEY] == 2 == VERSION


def test_params_come_from_the_command_line_as_name_value_words(spec: Path, tmp_path: Path) -> None:
    """A relative spec is the record's neighbour; ``if-set``: an empty value is no value."""
    (tmp_path / "project").mkdir()
    (tmp_path / "project" / "job.json").write_text(json.dumps({
        KEY: 2, "action": "run", "spec": f"../{spec.parent.name}/{spec.name}", "params": {"msg": "value"},
        "options": {"tracking": False, "run_dir": str(tmp_path / "run")}}))
    done = subprocess.run([sys.executable, "-m", "distcomp.worker", "project/job.json", "msg=a b=c $(x)"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "[rank1]: rank 1 says a b=c $(x)" in done.stdout
    for words, message in ((["msg=a", "msg=b"], "parameter 'msg' is given twice"),
                           (["epochs=1"], "'epochs' is not one of its parameters (its parameters: msg)"),
                           (["--msg", "x"], "'--msg' is not NAME=VALUE")):
        bad = subprocess.run([sys.executable, "-m", "distcomp.worker", "project/job.json", *words], cwd=tmp_path,
                             capture_output=True, text=True, timeout=60)
        assert bad.returncode == 2 and message in bad.stderr and "Traceback" not in bad.stderr, bad.stderr


def test_an_if_set_param_left_empty_is_not_given(tmp_path: Path) -> None:
    record = JobRecord("run", "s.yaml", params={"a": "if-set", "b": "value"})
    assert dict(bind_params(record, ["a=", "b="]).inputs) == {"b": ""}
    assert dict(bind_params(record, ["a=1"]).inputs) == {"a": "1"}


@pytest.mark.slow
def test_a_submit_record_submits_to_the_target_and_waits(spec: Path, tmp_path: Path) -> None:
    """``distcomp.submit(spec, TARGET, **options)``, checked against the target's options, then
    the wait and the JobOutcome file, as ``distcomp submit --status-file`` gives them."""
    record = write_record(tmp_path / "job.json", JobRecord(
        "submit", str(spec), inputs={"msg": "submitted"}, target="local", outcome_file=str(tmp_path / "out.json"),
        options={"run_dir": str(tmp_path / "run"), "tracking": False, "nproc_per_node": 1}))
    done = _worker(record, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"local:{tmp_path / 'run'}"  # the job id, alone on stdout
    outcome = json.loads((tmp_path / "out.json").read_text())
    assert outcome["state"] == "succeeded" and len(json.loads((tmp_path / "run" / "status.json").read_text())[
        "processes"]) == 1
    assert "rank 0 says submitted" in (tmp_path / "run" / "console.log").read_text()
    bad = write_record(tmp_path / "bad.json", JobRecord("submit", str(spec), target="local",
                                                        options={"gpus_per_node": 1}))
    refused = _worker(bad, tmp_path)
    assert refused.returncode == 2 and "target 'local' does not take 'gpus_per_node'" in refused.stderr


@pytest.mark.parametrize("text,message", [
    ("not json", "not a job record (not JSON"),
    ('{"action": "run"}', "not a distcomp job record (no 'distcomp_job' version)"),
    (json.dumps({KEY: 1, "action": "explode"}), "unknown action 'explode'"),
    (json.dumps({KEY: 1, "action": "run", "spec": "x", "options": {"rm_rf": True}}), "option 'rm_rf' = True"),
])
def test_a_bad_record_is_one_clear_line(text: str, message: str, tmp_path: Path) -> None:
    path = tmp_path / "job.json"
    path.write_text(text)
    done = _worker(path, tmp_path)
    assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr, done.stderr


def test_the_record_round_trips() -> None:
    record = JobRecord("run", "s.yaml", "/w", {"a": "1"}, {"o": "/p"}, {"E": "v"}, {"nodes": 2})
    assert record.to_json()[KEY] == 1 and record.to_json()["distcomp"] == distcomp.__version__


@pytest.mark.slow
def test_a_background_local_job_runs_from_its_record_not_from_flags(spec: Path, tmp_path: Path) -> None:
    run_dir = tmp_path / "bg"
    done = subprocess.run([sys.executable, "-m", "distcomp", "submit", "--target", "local", str(spec), "--detach",
                           "--run-dir", str(run_dir), "--no-tracking", "-i", "msg=secret-free words",
                           "--env", "ECHO_SLEEP=3"],  # running long enough to read its process's argv
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    record = read_record(run_dir / "job.json")
    assert (record.action, record.inputs) == ("run", {"msg": "secret-free words"})
    assert stat.S_IMODE((run_dir / "job.json").stat().st_mode) == 0o600
    pid = json.loads((run_dir / "status.json").read_text())["supervisor"]["pid"]
    argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[:-1]
    assert argv[1:] == [b"-m", b"distcomp.worker", str(run_dir / "job.json").encode()]  # no flag, no value
    deadline = time.monotonic() + 60
    while json.loads((run_dir / "status.json").read_text())["state"] == "running" and time.monotonic() < deadline:
        time.sleep(0.1)
    assert json.loads((run_dir / "status.json").read_text())["state"] == "succeeded"
    assert "rank 0 says secret-free words" in (run_dir / "console.log").read_text()


def test_bad_inputs_of_a_record_are_said_as_distcomp_run_says_them(spec: Path, tmp_path: Path) -> None:
    """The MLflow project's entry point: every bad input, one a line, the lines after the first indented."""
    record = write_record(tmp_path / "job.json", JobRecord(
        "run", str(spec), str(tmp_path), {"msg": "hi", "mgs": "x", "nope": "y"}, {}, {},
        {"run_dir": str(tmp_path / "run"), "tracking": False}))
    done = _worker(record, tmp_path)
    assert (done.returncode, done.stdout) == (2, ""), done.stderr
    assert done.stderr.splitlines() == ["distcomp run: unknown input 'mgs' (expected one of: msg)",
                                        "  unknown input 'nope' (expected one of: msg)"]
    assert not (tmp_path / "run").exists()
