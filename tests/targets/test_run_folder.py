"""What a job leaves in its run folder and outputs: one job per folder, outputs a failed job
left marked incomplete, what a restart found there, and no secret input in clear anywhere."""

from __future__ import annotations

import pytest
import re
import socket
import subprocess
import time
from pathlib import Path

from tests.targets._jobs import WAIT, finish, wait_for
from tests.targets._supervised import command, everything_under, launch, record, status

HOST = socket.gethostname()


@pytest.mark.slow
def test_second_job_on_a_busy_run_folder_is_refused_and_changes_nothing(sqlite_uri: str, tmp_path: Path) -> None:
    from mlflow import MlflowClient

    shared = tmp_path / "shared-run"
    t0 = time.monotonic()
    first, run_dir, first_state = launch(tmp_path, run_dir=shared, name="a", tracking=sqlite_uri, mode="bind",
                                         hold=3)
    wait_for([first_state / "rank0.0.json", first_state / "rank1.0.json"], first)
    before = everything_under(shared)

    argv, env, _, _ = command(tmp_path, run_dir=shared, name="b", tracking=sqlite_uri, mode="bind", hold=0)
    second = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=WAIT)
    assert second.returncode == 2, second.stderr
    assert re.fullmatch(re.escape(f"distcomp run: run folder {shared} is in use by job shared-run (pid {first.pid} on "
                                  f"host {HOST}, since ") + r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d"
                        + re.escape("); pick another --run-dir\n"), second.stderr), second.stderr
    assert second.stdout == "" and not (tmp_path / "b-state").exists()
    after = everything_under(shared)
    # the second job wrote nothing: status.json and the lock are the first job's; the logs only grew by its lines
    # (the first job's own watchdog may note, at any time, a child of its supervisor it adopts: its node monitor)
    mine = ("logs/", ".distcomp.adopted")
    assert {k: v for k, v in after.items() if not k.startswith(mine)} == \
        {k: v for k, v in before.items() if not k.startswith(mine)}
    for name in ("logs/rank0.log", "logs/rank1.log"):
        assert after[name].startswith(before[name]) and after[name].count(b"=== attempt") == 1

    done = finish(first, run_dir, first_state, t0)
    assert done.returncode == 0, done.explain()
    final = status(shared)
    assert final["state"] == "succeeded" and final["supervisor"]["pid"] == first.pid
    assert sorted(p["pid"] for p in final["processes"]) == sorted(record(first_state, r)["pid"] for r in (0, 1))
    experiment = MlflowClient(sqlite_uri).get_experiment_by_name("supervision-job")
    assert len(MlflowClient(sqlite_uri).search_runs([experiment.experiment_id])) == 1  # none for the refused job

    # the folder is free again once its job has ended
    again = finish(*launch(tmp_path, run_dir=shared, name="c", mode="bind", hold=0), time.monotonic())
    assert again.returncode == 0, again.explain()


def test_failed_job_marks_its_outputs_incomplete(tmp_path: Path) -> None:
    run = finish(*launch(tmp_path, mode="partial", end="fail"), time.monotonic())
    assert run.returncode == 1, run.explain()
    out = run.run_dir / "outputs" / "result"
    marker = out.with_name("result.distcomp-incomplete")
    st = run.status
    assert st["outputs"] == {"result": str(out)}  # where it is, as before: readers of status.json keep working
    assert st["incomplete_outputs"] == {"result": str(marker)}
    text = marker.read_text()
    assert text.startswith("incomplete: job job-run failed: rank0 (worker, node 0, pid ") and str(run.run_dir) in text
    assert sorted(p.name for p in out.parent.iterdir()) == ["result", "result.distcomp-incomplete"]
    assert sorted(p.name for p in out.iterdir()) == ["ckpt-0.txt"]  # what the failed job wrote, kept


def test_restart_keeps_and_reports_what_the_failed_attempt_left(tmp_path: Path) -> None:
    run = finish(*launch(tmp_path, "--max-restarts", "1", "--grace", "2", mode="partial", end="ok"), time.monotonic())
    assert run.returncode == 0, run.explain()
    out = run.run_dir / "outputs" / "result"
    line = f"distcomp run: attempt 2 starts with 1 file(s) (100 B) kept from attempt 1 in {out}\n"
    assert line in run.stderr, run.explain()
    assert run.stderr.index("restarting every rank (restart 1 of 1)") < run.stderr.index(line)
    assert run.status["found_outputs"] == [{"attempt": 2, "output": "result", "path": str(out), "files": 1,
                                            "bytes": 100}]
    assert "rank 0: resumed from ['ckpt-0.txt', 'ckpt-1.txt']" in run.log("rank0")
    # succeeded: no marker, nothing incomplete
    assert run.status["incomplete_outputs"] == {}
    assert sorted(p.name for p in out.parent.iterdir()) == ["result"]


def test_secret_input_is_never_written_in_clear(tmp_path: Path) -> None:
    secret = "hunter2-Sup3r"
    run = finish(*launch(tmp_path, "--grace", "2", mode="secret", db_password=secret), time.monotonic())
    assert run.returncode == 1, run.explain()
    for name, data in everything_under(run.run_dir).items():
        assert secret.encode() not in data, f"{name} holds the secret"
    assert secret not in run.stderr and secret not in run.stdout
    # masked, not dropped: the header, the ranks' lines, the root cause
    assert "--password *** --result" in run.log("rank0").splitlines()[0]
    assert "rank 1: login refused for password=***" in run.log("rank1")
    assert "[rank0]: rank 0: connecting with password ***" in run.stdout
    assert run.status["root_cause"]["tail"][-1] == "rank 1: login refused for password=***"
    assert "    rank 1: login refused for password=***\n" in run.stderr


PEM = ("-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj\n"
       "MzEfYyjiWA4R4/M2bS1GB4t7NXp98C3SC6dVMvDuictGeurT8jNbvJZHtCSuYEvu\n-----END PRIVATE KEY-----")


def test_a_multi_line_secret_and_an_env_secret_are_masked_everywhere(sqlite_uri: str, tmp_path: Path) -> None:
    """A PEM key: its lines are split by the logs and the console, each is masked (before: all in
    clear); an --env API_TOKEN a rank prints is masked like an input (before: in clear)."""
    from mlflow import MlflowClient

    token = "tok-Env-9f8e7d6c"
    run = finish(*launch(tmp_path, "--grace", "2", "--env", f"API_TOKEN={token}", mode="secret", db_password=PEM,
                         tracking=sqlite_uri), time.monotonic())
    assert run.returncode == 1, run.explain()
    clear = [line for line in PEM.splitlines()] + [token]
    for name, data in everything_under(run.run_dir).items():
        for text in clear:
            assert text.encode() not in data, f"{name} holds {text!r}"
    for text in clear:
        assert text not in run.stderr and text not in run.stdout, text
    # masked line by line: rank 1's failure shows *** where each line of the key was
    assert run.status["root_cause"]["tail"][-4:] == ["rank 1: login refused for password=***", "***", "***", "***"]
    assert "[rank0]: rank 0: token ***" in run.stdout and "rank 0: token ***" in run.log("rank0")
    assert "    rank 1: login refused for password=***\n    ***\n    ***\n    ***\n" in run.stderr
    client = MlflowClient(sqlite_uri)
    (found,) = client.search_runs([client.get_experiment_by_name("supervision-job").experiment_id])
    failure = found.data.tags["distcomp.failure"]
    assert failure.endswith("rank 1: login refused for password=***\n    ***\n    ***\n    ***"), failure
    for value in [*found.data.tags.values(), *found.data.params.values()]:
        assert not any(text in value for text in clear), value


def test_a_two_character_secret_is_masked_where_it_is_a_word(tmp_path: Path) -> None:
    """Before: a value under 3 characters was never masked (``--password ab`` in the header)."""
    run = finish(*launch(tmp_path, "--grace", "2", mode="secret", db_password="ab"), time.monotonic())
    assert run.returncode == 1, run.explain()
    header = run.log("rank0").splitlines()[0]
    assert "--password *** --result" in header and " ab " not in header, header
    assert "rank 1: login refused for password=***" in run.log("rank1")
    assert "[rank0]: rank 0: connecting with password ***" in run.stdout
    assert run.status["root_cause"]["tail"][-1] == "rank 1: login refused for password=***"
    assert "=== attempt 1: worker 0" in header  # the words around it are kept
