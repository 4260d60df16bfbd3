"""distcomp.runtime's logging against every real store a rank writes, no mocks: a SQLite
database written directly, a real ``mlflow server``, and MLflow's own client (see _stores).

The test plays the launcher: it creates the run with MlflowClient and starts small rank
scripts as subprocesses with the environment `distcomp run` gives its ranks, then reads the
run back. Scripts that queue nothing never import mlflow, so only a few cost its ~2 s import.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from distcomp.runtime._logging import NO_RUN_NOTICE

from ._stores import Store, last_json, notices, run_script, started


def history(store: Store, run_id: str, key: str) -> list[tuple[int, float]]:
    return store.history(run_id, key)


# -- the main rank --------------------------------------------------------------------------

MAIN_RANK = """
    import json, os, sqlite3, sys, threading, time
    from pathlib import Path

    importers = []  # threads that import mlflow: none, a SQLite store is written directly

    class Spy:
        def find_spec(self, name, path=None, target=None):
            if name == "mlflow":
                importers.append(threading.current_thread().name)
            return None

    sys.meta_path.insert(0, Spy())
    import distcomp.runtime as rt

    run, db, art = os.environ["DISTCOMP_MLFLOW_RUN_ID"], sys.argv[1], Path(sys.argv[2])
    before = time.time_ns() // 1_000_000
    rt.log_metric("stamp", 1.0, step=7)
    after = time.time_ns() // 1_000_000
    time.sleep(0.2)  # the worker takes the stamp and opens the store: what follows piles up, artifact included
    for i in range(2000):
        rt.log_metric("loss", i / 2, step=i)
    for i in range(250):
        rt.log_metrics({"acc": i / 250, "lr_now": 0.001}, step=i)
    try:
        rt.log_metrics({"half_valid": 1.0, "bad": "x"}, step=0)  # all or nothing
    except TypeError:
        pass
    rt.log_params({f"p{i:03d}": i for i in range(200)})
    rt.log_param("lr", 0.2)  # the launcher logged 0.1: MLflow refuses the change
    rt.log_param("batch_size", 64)  # the launcher logged 32: same kind of problem, no second warning
    for i in range(200, 250):
        rt.log_param(f"p{i:03d}", i)

    notes = Path("notes.txt")
    notes.write_text("original")
    rt.log_artifact(notes, "reports")
    notes.write_text("changed at once")  # the upload must carry the file as it was at the call
    target = art / "reports" / "notes.txt"
    deadline = time.monotonic() + 60
    while not target.exists() and time.monotonic() < deadline:
        time.sleep(0.002)
    with sqlite3.connect(db, timeout=30) as con:  # what was durable when the artifact arrived (the server's db too)
        at_artifact = con.execute("select count(*) from metrics where run_uuid = ?", (run,)).fetchone()[0]

    Path("cfg/sub").mkdir(parents=True)
    Path("cfg/a.yaml").write_text("a: 1")
    Path("cfg/sub/b.txt").write_text("b")
    rt.log_artifacts("cfg", "config")
    ok = rt.flush(60)
    print(json.dumps({"importers": importers, "before": before, "after": after,
                      "at_artifact": at_artifact, "flushed": ok, "logging": rt.is_logging_rank(),
                      "run_id": rt.run_id()}))
"""


@pytest.mark.slow
def test_main_rank_logs_everything_in_order(store: Store, tmp_path: Path) -> None:
    run = store.new_run()
    store.client.log_param(run, "lr", "0.1")  # as a launcher might, from the spec
    store.client.log_param(run, "batch_size", "32")
    art = store.artifact_dir(run)
    proc = run_script(MAIN_RANK, store.env(run), str(store.db), str(art), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = last_json(proc)
    assert out["flushed"] and out["logging"] and out["run_id"] == run
    # asynchronous and light: mlflow never imported (SQLite and a server are written directly;
    # only a store that MLflow alone handles costs the sender thread that import), timestamps
    # from the call
    assert out["importers"] == (["distcomp-mlflow"] if store.kind == "client" else [])
    (stamp,) = store.client.get_metric_history(run, "stamp")
    assert (stamp.step, stamp.value) == (7, 1.0) and out["before"] <= stamp.timestamp <= out["after"]
    # every point, in batches within MLflow's limits
    assert history(store, run, "loss") == [(i, i / 2) for i in range(2000)]
    assert history(store, run, "acc") == [(i, i / 250) for i in range(250)]
    assert len(history(store, run, "lr_now")) == 250
    data = store.client.get_run(run).data
    assert "half_valid" not in data.metrics
    # 250 new params; the refused ones keep the launcher's values, with one warning for both
    assert data.params == {**{f"p{i:03d}": str(i) for i in range(250)}, "lr": "0.1", "batch_size": "32"}
    (warning,) = notices(proc.stderr)
    assert "already" in warning and "kept" in warning and run in warning, proc.stderr[-3000:]
    # the artifact went after the metrics queued before it, as the file was at the call
    assert out["at_artifact"] == 1 + 2000 + 500
    assert (art / "reports" / "notes.txt").read_text() == "original"
    assert (art / "config" / "a.yaml").read_text() == "a: 1" and (art / "config" / "sub" / "b.txt").read_text() == "b"


RAISES = """
    import os
    import distcomp.runtime as rt
    del os.environ["MLFLOW_RUN_ID"]  # as mlflow.start_run() does: DISTCOMP_MLFLOW_RUN_ID is the copy that stays
    for i in range(1200):
        rt.log_metric("m", float(i), step=i)
    rt.log_params({"a": 1, "b": "two"})
    raise RuntimeError("boom after logging")
"""


@pytest.mark.slow
def test_uncaught_exception_still_flushes_at_exit(store: Store) -> None:
    run = store.new_run()
    proc = run_script(RAISES, store.env(run))
    assert proc.returncode == 1 and "RuntimeError: boom after logging" in proc.stderr
    assert history(store, run, "m") == [(i, float(i)) for i in range(1200)]
    assert store.client.get_run(run).data.params == {"a": "1", "b": "two"}
    assert notices(proc.stderr) == []


SIGTERMED = """
    import time
    import distcomp.runtime as rt
    for i in range(1000):
        rt.log_metric("m", float(i), step=i)
    rt.log_param("p", "x")
    print("logged", flush=True)
    time.sleep(60)
"""


@pytest.mark.slow
def test_sigterm_flushes_then_dies_of_sigterm(store: Store) -> None:
    run = store.new_run()
    # The worker is still opening the store when SIGTERM comes: without the handler nothing
    # would be sent. The bound (3 s by default) is raised so a loaded machine cannot fail this.
    env = store.env(run, DISTCOMP_SIGTERM_FLUSH_S="60")
    with started(SIGTERMED, env) as proc:
        assert proc.stdout is not None and proc.stdout.readline() == "logged\n"
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=90)
    assert proc.returncode == -signal.SIGTERM, err[-3000:]
    assert notices(err) == []  # everything was sent: nothing to report
    assert history(store, run, "m") == [(i, float(i)) for i in range(1000)]
    assert store.client.get_run(run).data.params == {"p": "x"}


ENDS_WITH_OS_EXIT = """
    import json, os, sys, threading
    import distcomp.runtime as rt
    for i in range(1500):  # two batches
        rt.log_metric("m", float(i), step=i)
    rt.log_params({"a": 1})
    # what the runtime added to this process while it logs: daemon threads only
    during = [(t.name, t.daemon) for t in threading.enumerate() if t is not threading.main_thread()]
    ok = rt.finish()
    after = [t.name for t in threading.enumerate() if t is not threading.main_thread()]
    print(json.dumps({"during": during, "after": after, "finished": ok}))
    sys.stdout.flush()
    os._exit(0)  # as a torch script does after destroy_process_group(): no exit hook runs
"""


@pytest.mark.slow
def test_finish_delivers_everything_before_os_exit(store: Store) -> None:
    run = store.new_run()
    proc = run_script(ENDS_WITH_OS_EXIT, store.env(run))
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = last_json(proc)
    assert out["finished"] is True and notices(proc.stderr) == []
    assert history(store, run, "m") == [(i, float(i)) for i in range(1500)]
    assert store.client.get_run(run).data.params == {"a": "1"}
    # nothing of distcomp's can race the interpreter's end: its one thread is a daemon, and
    # finish() stopped it
    assert out["during"] == [["distcomp-mlflow", True]] and out["after"] == []


FINISH_UNDELIVERED = """
    import json, os, sys
    import distcomp.runtime as rt
    for i in range(10):
        rt.log_metric("m", float(i), step=i)
    ok = rt.finish(5)
    print(json.dumps({"finished": ok}))
    sys.stdout.flush()
    os._exit(0)
"""


@pytest.mark.slow
def test_finish_reports_what_it_could_not_deliver(sqlite_store: Store, tmp_path: Path) -> None:
    reports = tmp_path / "reports"
    env = sqlite_store.env("0" * 32, DISTCOMP_TRACKING_DIR=str(reports))  # a run this store does not have
    proc = run_script(FINISH_UNDELIVERED, env, cwd=tmp_path)
    assert proc.returncode == 0 and last_json(proc) == {"finished": False}, proc.stderr[-3000:]
    *_, summary = notices(proc.stderr)
    assert "at finish: kept 0 of 10 metric points; 10 were not logged" in summary, proc.stderr[-3000:]
    (report,) = reports.glob("undelivered-*.json")
    assert json.loads(report.read_text())["reason"] == "finish"


FORKS = """
    import os, sys
    import distcomp.runtime as rt
    rt.log_metric("parent_before", 1.0)
    pid = os.fork()
    if pid == 0:  # like a DataLoader worker
        rt.log_metric("from_child", 1.0)
        rt.log_param("child", 1)
        sys.exit(0 if rt.flush(5) and not rt.is_logging_rank() else 3)  # atexit runs here too
    _, status = os.waitpid(pid, 0)
    rt.log_metric("from_parent", float(os.waitstatus_to_exitcode(status)))
"""


@pytest.mark.slow
def test_forked_child_logs_nothing(store: Store) -> None:
    run = store.new_run()
    proc = run_script(FORKS, store.env(run))
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = store.client.get_run(run).data
    assert data.metrics == {"parent_before": 1.0, "from_parent": 0.0} and data.params == {}


UNKNOWN_RUN = """
    import json
    import distcomp.runtime as rt
    for i in range(2500):  # three batches, one warning
        rt.log_metric("m", float(i), step=i)
    rt.log_params({"a": 1})
    open("f.txt", "w").write("f")
    rt.log_artifact("f.txt")
    rt.log_metric("after", 1.0)
    print(json.dumps({"flushed": rt.flush(60), "undelivered": rt.undelivered().as_dict()}))
"""


@pytest.mark.slow
def test_refused_sends_are_counted_warned_once_per_kind_and_never_crash(store: Store, tmp_path: Path) -> None:
    reports = tmp_path / "reports"
    env = store.env("0" * 32, DISTCOMP_TRACKING_DIR=str(reports))  # a run this store does not have
    proc = run_script(UNKNOWN_RUN, env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lost = {"metrics": 2501, "params": 1, "artifacts": 1}
    assert last_json(proc) == {"flushed": False, "undelivered": lost}
    *refused, summary = notices(proc.stderr)
    assert sorted(w.split(":")[1].strip() for w in refused) == ["could not log artifacts", "could not log metrics",
                                                                 "could not log params"], proc.stderr[-3000:]
    assert all("0" * 32 in w for w in refused)
    assert ("at exit: kept 0 of 2,501 metric points; 2,501 were not logged; kept 0 of 1 param; 1 was not logged; "
            "kept 0 of 1 artifact file; 1 was not logged") in summary
    (report,) = reports.glob("undelivered-*.json")
    assert str(report) in summary
    got = json.loads(report.read_text())
    assert got["run_id"] == "0" * 32 and got["reason"] == "exit" and got["undelivered"] == got["logged"] == lost


# -- other ranks and processes without a run: no mlflow, no sends -----------------------------

QUIET = """
    import json, os, signal, sys
    import distcomp.runtime as rt
    rt.log_metric("m", 1.0, step=1)
    rt.log_metrics({"a": 2.0})
    rt.log_param("p", 1)
    rt.log_params({"q": 2})
    open("f.txt", "w").close()
    rt.log_artifact("f.txt")
    rt.log_artifact("written-by-rank-0-only.pt")  # not checked off the main rank: it may not be here
    rt.log_artifacts(".")
    print(json.dumps({"flushed": rt.flush(), "logging": rt.is_logging_rank(), "run_id": rt.run_id(),
                      "mlflow": sorted(m for m in sys.modules if m.split(".")[0] == "mlflow"),
                      "sigterm_ours": signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL}))
"""


def test_other_rank_logs_nothing(sqlite_store: Store, tmp_path: Path) -> None:
    run = sqlite_store.new_run()
    proc = run_script(QUIET, sqlite_store.env(run, rank=1), cwd=tmp_path)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr[-3000:]
    assert last_json(proc) == {"flushed": True, "logging": False, "run_id": run, "mlflow": [], "sigterm_ours": False}
    data = sqlite_store.client.get_run(run).data
    assert data.metrics == {} and data.params == {}
    assert not sqlite_store.artifact_dir(run).exists()


@pytest.mark.parametrize("extra, stderr", [({}, NO_RUN_NOTICE + "\n"), ({"DISTCOMP_TRACKING": "off"}, "")],
                         ids=["no-run-id", "tracking-off"])
def test_without_a_run_is_a_no_op_with_one_notice(sqlite_store: Store, tmp_path: Path, extra: dict, stderr: str) -> None:
    code = QUIET.replace('rt.log_artifact("written-by-rank-0-only.pt")', "")  # rank 0 checks the file
    env = sqlite_store.env(None, rank=None, **extra)  # no launcher at all: a single process, rank 0
    if extra:
        env["MLFLOW_RUN_ID"] = sqlite_store.new_run()  # a stale id in the shell does not override "off"
    proc = run_script(code, env, cwd=tmp_path)
    assert proc.returncode == 0 and proc.stderr == stderr
    assert last_json(proc) == {"flushed": True, "logging": False, "run_id": None, "mlflow": [], "sigterm_ours": False}


BAD_CALLS = """
    import json, os
    import distcomp.runtime as rt
    here = os.getcwd()  # the test's own folder
    calls = {
        "empty key": lambda: rt.log_metric("", 1.0),
        "int key": lambda: rt.log_metric(3, 1.0),
        "bad character": lambda: rt.log_metric("loss!", 1.0),
        "not normalized": lambda: rt.log_metric("a//b", 1.0),
        "string value": lambda: rt.log_metric("m", "1.0"),
        "None value": lambda: rt.log_metric("m", None),
        "float step": lambda: rt.log_metric("m", 1.0, step=1.5),
        "bool step": lambda: rt.log_metric("m", 1.0, step=True),
        "huge step": lambda: rt.log_metric("m", 1.0, step=2**63),
        "metrics list": lambda: rt.log_metrics([("m", 1.0)]),
        "one bad metric": lambda: rt.log_metrics({"m": 1.0, "n": object()}),
        "None param key": lambda: rt.log_param(None, 1),
        "long param key": lambda: rt.log_params({"k" * 251: 1}),
        "param changed": lambda: (rt.log_param("k", 1), rt.log_param("k", 2)),
        "path type": lambda: rt.log_artifact(123),
        "absolute artifact_path": lambda: rt.log_artifact(here, "/abs"),
        "escaping artifact_path": lambda: rt.log_artifacts(here, "a/../../b"),
        "artifact_path type": lambda: rt.log_artifacts(here, 5),
        "missing file": lambda: rt.log_artifact(os.path.join(here, "nope")),
        "negative timeout": lambda: rt.flush(-1),
    }
    out = {}
    for name, call in calls.items():
        try:
            call()
            out[name] = "ok"
        except Exception as exc:
            out[name] = type(exc).__name__
    print(json.dumps(out))
"""

EXPECTED_ERRORS = {
    "empty key": "ValueError", "int key": "TypeError", "bad character": "ValueError", "not normalized": "ValueError",
    "string value": "TypeError", "None value": "TypeError", "float step": "TypeError", "bool step": "TypeError",
    "huge step": "ValueError", "metrics list": "TypeError", "one bad metric": "TypeError",
    "None param key": "TypeError", "long param key": "ValueError", "param changed": "ValueError",
    "path type": "TypeError", "absolute artifact_path": "ValueError", "escaping artifact_path": "ValueError",
    "artifact_path type": "TypeError", "negative timeout": "ValueError",
}


@pytest.mark.parametrize("rank", [1, None], ids=["rank-1-of-2", "single-process"])
def test_bad_arguments_raise_on_every_rank(sqlite_store: Store, rank: int | None, tmp_path: Path) -> None:
    proc = run_script(BAD_CALLS, sqlite_store.env(sqlite_store.new_run() if rank else None, rank=rank), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    # a file rank 0 wrote may not exist on rank 1: checked where it is sent from only
    assert last_json(proc) == {**EXPECTED_ERRORS, "missing file": "ok" if rank else "FileNotFoundError"}


def test_import_does_not_import_mlflow() -> None:
    code = "import sys, distcomp.runtime; print(sorted(m for m in sys.modules if m.split('.')[0] == 'mlflow'))"
    proc = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.strip() == "[]", proc.stderr[-3000:]


OWN_HANDLER = """
    import json, signal
    import distcomp.runtime as rt
    mine = lambda signum, frame: None
    signal.signal(signal.SIGTERM, mine)
    rt.is_logging_rank()  # logging starts: must leave the script's own handler alone
    print(json.dumps({"kept": signal.getsignal(signal.SIGTERM) is mine, "logging": rt.is_logging_rank()}))
"""


def test_sigterm_handler_of_the_script_is_kept(sqlite_store: Store) -> None:
    proc = run_script(OWN_HANDLER, sqlite_store.env(sqlite_store.new_run()))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert last_json(proc) == {"kept": True, "logging": True}
