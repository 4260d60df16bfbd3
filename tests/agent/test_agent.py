"""The node agent (``python -m distcomp.agent JOB.json``) with real processes: it binds the
placeholders from its environment, starts its node's replicas, ends the others when one fails,
leaves no process after a SIGTERM, and refuses a record it cannot read. It runs on the standard
library alone, apart from the rest of distcomp."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

import distcomp.agent
from distcomp import records
from distcomp.agent import record as schema
from distcomp.core.agentjob import Platform, node_record
from distcomp.records import COMMAND, Replica, Topology, host, node_name, port
from distcomp.base.redact import Masker
from distcomp.targets import _secrets

AGENT = Path(distcomp.agent.__file__).parent
PY = sys.executable
# a replica that writes what it was given (argv, some env) to OUT/NAME.json
DUMP = ("import json, os, sys; names = ('WHO', 'ADDR', 'PORT', 'JOB_DIR', 'SECRET', 'OMP_NUM_THREADS');"
        "json.dump({'argv': sys.argv[1:], 'cwd': os.getcwd(), **{n: os.environ.get(n) for n in names}},"
        " open(os.path.join(os.environ['OUT'], os.environ['WHO'] + '.json'), 'w'));"
        "print('hello from', os.environ['WHO'])")


def _record(tmp_path: Path, replicas: list[dict[str, Any]], **extra: Any) -> Path:
    data = {schema.KEY: schema.VERSION, "job": "t", "nodes": 2, "cwd": str(tmp_path),
            "command": [PY, "-c", DUMP], "env": {"OUT": str(tmp_path)}, "replicas": replicas,
            "node_env": ["TEST_NODE"], "node_name_env": ["TEST_NODE_NAME"], "grace": 2.0, **extra}
    path = tmp_path / "job" / "node.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(data))
    return path


def _replica(name: str, node: int = 0, argv: tuple[str, ...] = (COMMAND,), **env: str) -> dict[str, Any]:
    return {"name": name, "role": "worker", "index": 0, "node": node, "argv": list(argv),
            "env": {"WHO": name, **env}}


def _agent(path: Path, node: int | None = 0, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("TEST_")}
    if node is not None:
        environ["TEST_NODE"] = str(node)
    return subprocess.run([PY, "-m", "distcomp.agent", str(path)], env={**environ, **env}, capture_output=True,
                          text=True, timeout=60)


def _exit(path: Path, name: str) -> dict[str, Any]:
    return json.loads((path.parent / "exits" / f"{name}.json").read_text())


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] not in (b"Z", b"X")
    except OSError:
        return False


def _marked(mark: str) -> list[int]:
    needle = f"\0AGENT_TEST_MARK={mark}\0".encode()
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/environ", "rb") as f:
                    if needle in b"\0" + f.read() and _alive(int(name)):
                        found.append(int(name))
            except OSError:
                pass
    return found


def test_binds_placeholders_writes_files_and_runs_only_its_nodes_replicas(tmp_path: Path) -> None:
    path = _record(tmp_path, [
        _replica("rank0", 0, (COMMAND, "--at", "{{host:1}}:{{port:master}}"), ADDR="{{host:0}}",
                 PORT="{{port:master}}", JOB_DIR="{{job_dir}}"),
        _replica("rank1", 0),
        _replica("rank2", 1)],
        files={"hostfile": "{{node:0}} slots=2\n{{node:1}} slots=1\n"}, ports=["master"],
        bind_env={"host:0": "TEST_HOST_0", "host:1": "TEST_HOST_1", "port:master": "TEST_PORT",
                  "node:0": "TEST_NODE_0", "node:1": "TEST_NODE_1"},
        defaults={"OMP_NUM_THREADS": "1"})
    proc = _agent(path, 0, TEST_HOST_0="10.0.0.1", TEST_HOST_1="10.0.0.2", TEST_PORT="29500",
                  TEST_NODE_0="n1", TEST_NODE_1="n2", TEST_NODE_NAME="n1")
    assert proc.returncode == 0, proc.stderr
    got = json.loads((tmp_path / "rank0.json").read_text())
    assert got["argv"] == ["--at", "10.0.0.2:29500"]
    assert (got["ADDR"], got["PORT"], got["JOB_DIR"], got["cwd"]) == ("10.0.0.1", "29500", str(path.parent),
                                                                     str(tmp_path))
    assert got["OMP_NUM_THREADS"] == "1"  # a default where the agent's env has none
    assert (path.parent / "hostfile").read_text() == "n1 slots=2\nn2 slots=1\n"
    assert not (tmp_path / "rank2.json").exists()  # node 1's
    assert sorted(p.name for p in (path.parent / "logs").iterdir()) == ["rank0.log", "rank1.log"]
    assert (path.parent / "logs" / "rank1.log").read_text() == "hello from rank1\n"
    ends = [_exit(path, n) for n in ("rank0", "rank1")]
    assert [(e["exit_code"], e["failed"], e["stopped"], e["node"], e["host"]) for e in ends] == [(0, False, False, 0, "n1")] * 2
    # an explicit default loses to the agent's own environment
    assert _agent(path, 0, OMP_NUM_THREADS="4", TEST_HOST_0="a", TEST_HOST_1="b", TEST_PORT="1",
                  TEST_NODE_0="x", TEST_NODE_1="y").returncode == 0
    assert json.loads((tmp_path / "rank0.json").read_text())["OMP_NUM_THREADS"] == "4"


def test_a_one_rank_replica_does_not_inherit_the_agents_task_variables(tmp_path: Path) -> None:
    """SLURM_PROCID of the agent's srun task (one per node) is not the rank of the replicas it
    starts: a library that reads it (Lightning's SLURM detection) would misplace them. A replica
    hosting several ranks (mpirun) keeps them: its launcher may need the allocation's."""
    # each replica writes its file whole (the agent stops the ps once the others end: they wait
    # for its file, so a loaded machine cannot stop it mid-write)
    dump = ("import json, os, time; out, who = os.environ['OUT'], os.environ['WHO'];"
            " open(os.path.join(out, who + '.tmp'), 'w').write(json.dumps("
            "{n: os.environ.get(n) for n in ('SLURM_PROCID', 'SLURM_JOB_ID')}));"
            " os.replace(os.path.join(out, who + '.tmp'), os.path.join(out, who + '.json'));"
            " [time.sleep(0.05) for _ in range(600) if not os.path.exists(os.path.join(out, 'ps0.json'))]")
    rank = {**_replica("rank0"), "rank": 0, "ranks": 1}
    ps = {**_replica("ps0"), "rank": None, "ranks": 1, "service": True}
    wrapper = {**_replica("launcher0"), "rank": None, "ranks": 2}
    path = _record(tmp_path, [rank, ps, wrapper], command=[PY, "-c", dump], task_env=["SLURM_PROCID"])
    assert _agent(path, 0, SLURM_PROCID="1", SLURM_JOB_ID="7").returncode == 0
    assert json.loads((tmp_path / "rank0.json").read_text()) == {"SLURM_PROCID": None, "SLURM_JOB_ID": "7"}
    assert json.loads((tmp_path / "ps0.json").read_text()) == {"SLURM_PROCID": None, "SLURM_JOB_ID": "7"}
    assert json.loads((tmp_path / "launcher0.json").read_text()) == {"SLURM_PROCID": "1", "SLURM_JOB_ID": "7"}


def test_a_wrappers_tagged_lines_go_to_each_ranks_log(tmp_path: Path) -> None:
    """A replica hosting several ranks (mpirun --output tag) declares its tag as data: each line
    it matches goes to that rank's log without the tag, and to the console as that rank's."""
    say = ("import sys; print('[1,0]<stdout>: zero'); print('[1,1]<stderr>: one'); print('mpirun: done');"
           "sys.stdout.write('[1,1]<stdout>: last, unfinished')")
    wrapper = {**_replica("launcher0"), "ranks": 2, "rank_prefix": r"^\[\d+,(?P<rank>\d+)\]<(?:stdout|stderr)>: ?"}
    path = _record(tmp_path, [wrapper], command=[PY, "-c", say], console=True)
    proc = _agent(path, 0)
    assert proc.returncode == 0, proc.stderr
    logs = path.parent / "logs"
    assert {p.name: p.read_text() for p in logs.iterdir()} == {
        "launcher0.log": "mpirun: done\n", "rank0.log": "zero\n", "rank1.log": "one\nlast, unfinished\n"}
    assert proc.stdout.splitlines() == ["[rank0] zero", "[rank1] one", "[launcher0] mpirun: done",
                                        "[rank1] last, unfinished"]
    bad = _record(tmp_path, [{**wrapper, "rank_prefix": "^(no rank group)"}])
    assert "'rank_prefix' must be an ASCII regular expression with a group 'rank'" in _agent(bad, 0).stderr


def test_a_missing_value_starts_nothing(tmp_path: Path) -> None:
    path = _record(tmp_path, [_replica("rank0", 0, ADDR="{{host:0}}")], bind_env={"host:0": "TEST_HOST_0"})
    proc = _agent(path, 0)
    assert proc.returncode == 2 and proc.stderr.splitlines() == [
        "distcomp agent: node 0: no value for placeholder {{host:0}} (the record's bind_env names the variable "
        "that carries it)"]
    assert not (tmp_path / "rank0.json").exists()


def test_a_node_with_no_replicas_exits_at_once(tmp_path: Path) -> None:
    path = _record(tmp_path, [_replica("launcher0", 0)])
    proc = _agent(path, 1)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", "")
    assert not (path.parent / "logs").exists() and not (tmp_path / "launcher0.json").exists()


def test_which_node_it_is_must_be_known(tmp_path: Path) -> None:
    path = _record(tmp_path, [_replica("rank0", 0)])
    assert _agent(path, None).stderr == ("distcomp agent: cannot tell which of the job's 2 nodes this is: none "
                                         "of $TEST_NODE is set\n")
    assert _agent(path, 5).stderr == "distcomp agent: $TEST_NODE='5' is not a node index of this job (0 to 1)\n"


def test_a_failing_replica_stops_the_others_and_is_reported(tmp_path: Path) -> None:
    mark = uuid.uuid4().hex
    sleeper = ("import os, subprocess, time; subprocess.Popen(['sleep', '300']);"  # a child too
               "print('sleeping', flush=True); time.sleep(300)")
    failer = "import sys, time; time.sleep(0.5); print('disk full, giving up', flush=True); sys.exit(3)"
    path = _record(tmp_path, [
        _replica("rank0", 0, (PY, "-c", sleeper, COMMAND)),
        _replica("rank1", 0, (PY, "-c", failer, COMMAND))], env={"AGENT_TEST_MARK": mark})
    try:
        proc = _agent(path, 0, TEST_NODE_NAME="n1")
        assert proc.returncode == 1, proc.stderr
        failed, stopped = _exit(path, "rank1"), _exit(path, "rank0")
        assert (failed["exit_code"], failed["failed"], failed["stopped"]) == (3, True, False)
        assert failed["tail"] == ["disk full, giving up"]
        assert (stopped["signal"], stopped["failed"], stopped["stopped"]) == (signal.SIGTERM, False, True)
        assert stopped["ended"] >= failed["ended"]
        assert _marked(mark) == []  # the sleeper's child too
    finally:
        for pid in _marked(mark):
            os.kill(pid, signal.SIGKILL)


def test_a_program_that_cannot_start_is_a_failure(tmp_path: Path) -> None:
    path = _record(tmp_path, [_replica("rank0", 0, ("/no/such/program", COMMAND))])
    proc = _agent(path, 0)
    assert proc.returncode == 1
    end = _exit(path, "rank0")
    assert end["exit_code"] == 127 and end["failed"] and "cannot start '/no/such/program'" in end["error"]


@pytest.mark.slow
def test_sigterm_to_the_agent_leaves_no_process(tmp_path: Path) -> None:
    mark = uuid.uuid4().hex
    # one replica ignores SIGTERM (SIGKILL after the grace), one leaves a child in a session of its own
    stubborn = ("import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN);"
                "print('ready', flush=True); time.sleep(300)")
    escaper = ("import subprocess, time; subprocess.Popen(['sleep', '301'], start_new_session=True);"
               "print('ready', flush=True); time.sleep(300)")
    path = _record(tmp_path, [_replica("rank0", 0, (PY, "-c", stubborn, COMMAND)),
                              _replica("rank1", 0, (PY, "-c", escaper, COMMAND))],
                   env={"AGENT_TEST_MARK": mark}, console=True)
    environ = {**os.environ, "TEST_NODE": "0"}
    agent = subprocess.Popen([PY, "-m", "distcomp.agent", str(path)], env=environ, stdout=subprocess.PIPE, text=True)
    try:
        assert agent.stdout is not None
        ready = sorted(agent.stdout.readline().strip() for _ in range(2))  # rank-prefixed, as it runs
        assert ready == ["[rank0] ready", "[rank1] ready"]
        deadline = time.monotonic() + 10  # the child's environment reads as such once its exec is done
        while len(_marked(mark)) < 3:
            assert time.monotonic() < deadline, _marked(mark)
            time.sleep(0.05)
        agent.send_signal(signal.SIGTERM)
        assert agent.wait(30) == 128 + signal.SIGTERM
        assert _marked(mark) == []
        ends = {n: _exit(path, n) for n in ("rank0", "rank1")}
        assert {n: (e["signal"], e["stopped"], e["failed"]) for n, e in ends.items()} == {
            "rank0": (signal.SIGKILL, True, False), "rank1": (signal.SIGTERM, True, False)}
    finally:
        if agent.poll() is None:
            agent.terminate()
            agent.wait()
        for pid in _marked(mark):
            os.kill(pid, signal.SIGKILL)


def test_a_service_is_stopped_once_the_others_are_done(tmp_path: Path) -> None:
    path = _record(tmp_path, [
        {**_replica("ps0", 0, (PY, "-c", "import time; time.sleep(300)", COMMAND)), "service": True},
        _replica("rank0", 0)])
    proc = _agent(path, 0)
    assert proc.returncode == 0, proc.stderr
    ps = _exit(path, "ps0")
    assert (ps["signal"], ps["stopped"], ps["failed"], ps["service"]) == (signal.SIGTERM, True, False, True)


@pytest.mark.slow
def test_a_service_waits_for_the_other_nodes(tmp_path: Path) -> None:
    """A node that hosts only a service (a parameter server) stops it once every other node's
    replica has reported its end in exits/ (a shared job folder)."""
    path = _record(tmp_path, [
        {**_replica("ps0", 0, (PY, "-c", "import time; time.sleep(300)", COMMAND)), "service": True},
        _replica("rank0", 1)])
    agent = subprocess.Popen([PY, "-m", "distcomp.agent", str(path)], env={**os.environ, "TEST_NODE": "0"})
    try:
        logs = path.parent / "logs" / "ps0.log"
        deadline = time.monotonic() + 30
        while not logs.exists():
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert agent.poll() is None
        assert _agent(path, 1).returncode == 0  # node 1's rank ends, and says so
        assert agent.wait(30) == 0
        assert _exit(path, "ps0")["stopped"]
    finally:
        if agent.poll() is None:
            agent.kill()
            agent.wait()


def test_secrets_reach_the_replica_and_stay_out_of_the_record_and_the_report(tmp_path: Path) -> None:
    secret = "hunter2 it's"
    masker = Masker.of({"password": secret})
    topology = Topology(launcher="mine", nodes=1, processes_per_node=1, world_size=1,
                        replicas=(Replica(role="worker", index=0, node=0, rank=0, env={"WHO": "rank0"}),))
    platform = Platform(node_env=("TEST_NODE",), secrets=_secrets.NAME, cwd=str(tmp_path))
    command = [PY, "-c", DUMP + f"; print({secret!r}); raise SystemExit(4)", secret]
    data = node_record(topology, command, {"OUT": str(tmp_path), "SECRET": f"pw={secret}"}, platform,
                       job="t", masker=masker)
    folder = tmp_path / "job"
    folder.mkdir()
    _secrets.write(folder / _secrets.NAME, masker)
    (folder / "node.json").write_text(json.dumps(data))
    assert "hunter2" not in (folder / "node.json").read_text()
    assert data["env"]["SECRET"] == ["pw=", masker.needles.index(secret)]
    proc = _agent(folder / "node.json", 0)
    assert proc.returncode == 1, proc.stderr
    got = json.loads((tmp_path / "rank0.json").read_text())
    assert (got["argv"], got["SECRET"]) == ([secret], f"pw={secret}")
    end = _exit(folder / "node.json", "rank0")
    assert end["tail"] == ["hello from rank0", "***"] and "hunter2" not in json.dumps(end)
    assert oct((folder / "logs").stat().st_mode & 0o777) == "0o700"


@pytest.mark.parametrize("data, said", [
    ({schema.KEY: schema.VERSION + 1, "nodes": 1},
     f"record version {schema.VERSION + 1} is newer than this agent reads (up to {schema.VERSION}); run the job "
     "with the distcomp it was made with, or upgrade distcomp where the job runs"),
    ({"nodes": 1}, f"not a distcomp node record (no {schema.KEY!r} field)"),
    ({schema.KEY: schema.VERSION, "nodes": 1, "command": ["x"], "replicas": [_replica("Rank 0")]},
     "replica {'name': 'Rank 0'"),
])
def test_a_record_it_cannot_read_is_refused_with_what_to_do(tmp_path: Path, data: dict[str, Any], said: str) -> None:
    path = tmp_path / "node.json"
    path.write_text(json.dumps(data))
    proc = _agent(path, 0)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith(f"distcomp agent: {path}: {said}"), proc.stderr
    assert list(tmp_path.iterdir()) == [path]


def test_bad_invocations() -> None:
    proc = subprocess.run([PY, "-m", "distcomp.agent"], capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stderr.startswith("usage: python -m distcomp.agent JOB.json")
    proc = subprocess.run([PY, "-m", "distcomp.agent", "/no/such/node.json"], capture_output=True, text=True)
    assert (proc.returncode, proc.stderr) == (2, "distcomp agent: cannot read the job record /no/such/node.json: "
                                                 "No such file or directory\n")


def test_runs_on_the_standard_library_alone(tmp_path: Path) -> None:
    """Only the agent package, beside an empty distcomp, under ``python -I -S`` (no site-packages,
    no PYTHONPATH): it imports nothing else of distcomp and nothing installed."""
    lone = tmp_path / "lone"
    shutil.copytree(AGENT, lone / "distcomp" / "agent", ignore=shutil.ignore_patterns("__pycache__"))
    (lone / "distcomp" / "__init__.py").write_text("")
    path = _record(tmp_path, [_replica("rank0", 0)])
    start = ("import runpy, sys; sys.path.insert(0, sys.argv.pop(1)); runpy.run_module('distcomp.agent', "
             "run_name='__main__', alter_sys=True)")
    proc = subprocess.run([PY, "-I", "-S", "-c", start, str(lone), str(path)], capture_output=True, text=True,
                          env={"TEST_NODE": "0", "PATH": os.environ["PATH"]}, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert json.loads((tmp_path / "rank0.json").read_text())["argv"] == []


def test_the_placeholders_are_those_of_distcomp_records() -> None:
    assert schema.PLACEHOLDER.pattern == records._PLACEHOLDER.pattern
    assert schema.COMMAND == records.COMMAND


def test_the_writer_names_a_variable_for_every_placeholder() -> None:
    topology = Topology(launcher="x", nodes=2, processes_per_node=1, world_size=2, ports=("master", "w-0"),
                        replicas=(Replica(role="worker", index=0, node=0, rank=0,
                                          env={"A": f"{host(1)}:{port('w-0')}", "B": node_name(0)}),),
                        files={"f": f"{host(0)}:{port('master')}"})
    data = node_record(topology, ["true"], {}, Platform(node_env=("N",)), job="x")
    assert data["bind_env"] == {"host:0": "DISTCOMP_HOST_0", "node:0": "DISTCOMP_NODE_0",
                                "host:1": "DISTCOMP_HOST_1", "node:1": "DISTCOMP_NODE_1",
                                "port:master": "DISTCOMP_PORT_0", "port:w-0": "DISTCOMP_PORT_1"}
    assert schema.check(json.loads(json.dumps(data)), "x") == data


# a wrapper of two ranks as mpirun is one: each rank started behind the program its exec agent
# variable names (distcomp's rank watcher), with OMPI_COMM_WORLD_RANK; rank 1 fails at once, rank 0
# sleeps; the wrapper itself waits for both, as mpirun does
WRAPPER = ("import os, subprocess, sys, time\n"
           "agent = os.environ['FAKE_EXEC_AGENT'].split()\n"
           "ranks = [subprocess.Popen(agent + [sys.executable, '-c', code], env={**os.environ,"
           " 'OMPI_COMM_WORLD_RANK': str(r)}) for r, code in enumerate(["
           "\"import time; print('rank 0 works', flush=True); time.sleep(60)\","
           "\"print('rank 1: shard 7 is corrupt', flush=True); raise SystemExit(3)\"])]\n"
           "print('[1,1]<stdout>: tagged line of rank 1', flush=True)\n"
           "for p in ranks: p.wait()\n")


def test_a_rank_that_fails_behind_a_wrapper_ends_the_job_at_once(tmp_path: Path) -> None:
    """``rank_hooks``: the agent names its rank watcher in the wrapper's variable; the first rank
    that fails is reported in exits/rankN.json (the root cause Slurm and Ray show), the wrapper
    is stopped with everything it started, and the agent fails, long before rank 0's 60 s."""
    mark = uuid.uuid4().hex
    wrapper = {**_replica("launcher0", AGENT_TEST_MARK=mark), "ranks": 2, "rank_hooks": ["FAKE_EXEC_AGENT"],
               "rank_prefix": r"^\[\d+,(?P<rank>\d+)\]<(?:stdout|stderr)>: ?"}
    path = _record(tmp_path, [wrapper], command=[PY, "-c", WRAPPER], nodes=1, world_size=2)
    start = time.monotonic()
    proc = _agent(path, 0)
    assert proc.returncode == 1, proc.stderr
    assert time.monotonic() - start < 20, proc.stderr  # not a timing: 60 s without the watcher
    rank1 = _exit(path, "rank1")
    assert (rank1["failed"], rank1["stopped"], rank1["exit_code"], rank1["rank"]) == (True, False, 3, 1)
    assert rank1["tail"] == ["tagged line of rank 1"]  # its own lines (the wrapper tags them)
    launcher = _exit(path, "launcher0")
    assert launcher["stopped"] and not launcher["failed"]
    assert "rank 1 exited with code 3" in proc.stderr
    assert _marked(mark) == []
