"""Pod-level conformance of the Kubeflow manifests, without a cluster.

For each job kind, compile a small all-reduce job (tests/targets/kubeflow/jobs/), make the
pods the operator would make from the manifest (_operator.py: the operator's env per pod,
the kubelet's ``$(VAR)`` expansion of the container command), point the cluster's names
at 127.0.0.1, and run every pod's exact container command here, concurrently. Every rank
then reports what it saw; the tests check that the ranks form the world the spec asked
for, in the layout the operator promises, and that the all-reduce is right.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from distcomp.core.plugins import get_plugin_manager
from distcomp.spec import bind_inputs, load
from distcomp.targets.kubeflow import compile_job
from distcomp.targets.kubeflow._mpijob import PORT
from distcomp.targets.kubeflow._pod import escape
from distcomp.core.plan import make_plan

from ._operator import (LOCALHOST, Pod, container_env, expand, free_ports, localize_endpoints, mpi_on_this_machine,
                        mpijob_pods, pytorchjob_pods, rank_records, run_pods, tfjob_pods)

JOBS = Path(__file__).resolve().parent / "jobs"
IMAGE = "test:1"


def compiled(job: str, nodes: int, per_node: int, tmp_path: Path,
             shell_var: str | None = None) -> tuple[dict[str, Any], list[str], Path]:
    """The manifest of jobs/JOB for ``nodes`` x ``per_node``, the user's argv in it (as
    rendered from the spec), and the folder the ranks write to. ``shell_var``: the command is
    a public-style shell line instead (``cd . && python rank.py ... --tag VALUE"/$VAR"``),
    which the shell of each rank must run with the rank's own $VAR."""
    source = JOBS / job / "component.yaml"
    if shell_var:
        text = source.read_text().replace("python rank.py", "cd . && python rank.py")
        source = tmp_path / "component.yaml"
        source.write_text(text.replace("--tag {inputs.tag}", f'--tag {{inputs.tag}}"/${shell_var}"'))
    spec = load(str(source)).with_overrides(nodes=nodes, processes_per_node=per_node)
    values = bind_inputs(spec, {"world": str(nodes * per_node)}, Path("/"))
    out = tmp_path / "result"
    outputs = {"result": str(out)}
    manifest = compile_job(make_plan(spec, gpu=False, pm=get_plugin_manager()), values, outputs, pm=get_plugin_manager(), image=IMAGE)
    return manifest, list(spec.render(values, outputs)), out


def rank_argv(user: list[str], seen: str | None) -> list[str]:
    """The arguments a rank's program gets: the user's words after ``python rank.py``; for the
    shell line, the words of its plain twin with the tag ending in the rank's own $VAR."""
    if seen is None:
        return user[2:]
    words = shlex.split(user[2])  # the line's words before any expansion ($ stays as written)
    words = words[words.index("rank.py") + 1:]
    at = words.index("--tag") + 1
    words[at] = words[at].rsplit("/$", 1)[0] + "/" + seen  # the value as written ("$(...)" is not run)
    return words


def user_part(argv: list[str], user: list[str]) -> list[str]:
    """The end of a container's argv that should be the user's command, unchanged."""
    return argv[len(argv) - len(user):]


# --- the kubelet's $(VAR) expansion ------------------------------------------------------

ENV = {"A": "x", "B": "y z", "EMPTY": ""}


@pytest.mark.parametrize(("text", "expected"), [
    ("$(A)", "x"),
    ("pre-$(A)-$(B)-post", "pre-x-y z-post"),
    ("$(EMPTY)", ""),
    ("$(MISSING)", "$(MISSING)"),  # an unknown name stays as written
    ("$$(A)", "$(A)"),  # escaped
    ("$$", "$"),
    ("a$$b", "a$b"),
    ("$$$(A)", "$x"),
    ("$$$$(A)", "$$(A)"),
    ("$", "$"),  # a trailing operator is kept
    ("a$", "a$"),
    ("$A", "$A"),  # not a reference
    ("$(A", "$(A"),  # incomplete reference
    ("$(A$(B))", "$(A$(B))"),  # the name runs to the first ')': "A$(B", unknown, then ")"
    ("$()", "$()"),
    ("", ""),
    ("no refs", "no refs"),
])
def test_expand_follows_kubernetes(text: str, expected: str) -> None:
    assert expand(text, ENV) == expected


def test_env_values_see_only_earlier_variables() -> None:
    env = container_env([("A", "1"), ("B", "$(A)-2"), ("C", "$(D)"), ("D", "4"), ("A", "5"), ("E", "$$(A)")],
                        base={"PATH": "/bin", "A": "image"})
    assert env == {"PATH": "/bin", "A": "5", "B": "1-2", "C": "$(D)", "D": "4", "E": "$(A)"}


@pytest.mark.parametrize("word", ["plain", "$(MASTER_ADDR)", "a$(", "$(", "x$(PET_NNODES)y", "$", "$HOME", "cost$",
                                  "a$$b", "$$(MASTER_ADDR)"])
def test_escaped_user_words_survive_the_kubelet(word: str) -> None:
    env = {"MASTER_ADDR": "m", "PET_NNODES": "2", "HOME": "/root"}
    assert [expand(w, env) for w in escape([word])] == [word]


# --- PyTorchJob --------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("shell", [False, True], ids=["words", "shell-line"])
def test_pytorchjob_pods_all_reduce(tmp_path: Path, shell: bool) -> None:
    """2 pods (Master, Worker) x nprocPerNode 2: each pod's torchrun, with the operator's env,
    starts 2 ranks; the 4 ranks form one world, numbered node by node. As a shell line, each
    rank's shell fills $RANK after torchrun has set it."""
    manifest, user, out = compiled("pytorchjob", 2, 2, tmp_path, "RANK" if shell else None)
    job = manifest["metadata"]["name"]
    pods = pytorchjob_pods(manifest)
    assert [p.name for p in pods] == [f"{job}-master-0", f"{job}-worker-0"]
    for rank, pod in enumerate(pods):  # what the operator gives each pod in a cluster
        assert {k: pod.env.get(k) for k in ("MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "PET_NNODES",
                                              "PET_NPROC_PER_NODE", "PET_NODE_RANK", "DISTCOMP_TEST_MARK")} == {
            "MASTER_ADDR": f"{job}-master-0", "MASTER_PORT": "23456", "WORLD_SIZE": "4", "RANK": str(rank),
            "PET_NNODES": "2", "PET_NPROC_PER_NODE": "2", "PET_NODE_RANK": str(rank), "DISTCOMP_TEST_MARK": "torch"}

    # here: the master's service name resolves to 127.0.0.1, and its port is a free one
    # rather than 23456 (the pods share this machine's ports; a fixed one could clash)
    port = free_ports(1)[0]
    local = [p.with_env(MASTER_ADDR=LOCALHOST, MASTER_PORT=str(port)) for p in pods]
    for rank, pod in enumerate(local):
        assert pod.argv == ["torchrun", "--nnodes", "2", "--nproc-per-node", "2", "--node-rank", str(rank),
                            "--master-addr", LOCALHOST, "--master-port", str(port), "--no-python", *user]
    done = run_pods(local, JOBS / "pytorchjob", tmp_path / "logs", timeout=150)
    assert set(done.codes.values()) == {0}, done.explain()

    records = rank_records(out)
    assert sorted(records) == [0, 1, 2, 3], done.explain()
    for rank, rec in records.items():
        node, local_rank = divmod(rank, 2)
        assert (rec["world"], rec["all_reduce"]) == (4, 10.0)
        assert rec["env"] == {
            "RANK": str(rank), "WORLD_SIZE": "4", "LOCAL_RANK": str(local_rank), "LOCAL_WORLD_SIZE": "2",
            "GROUP_RANK": str(node), "GROUP_WORLD_SIZE": "2", "MASTER_ADDR": LOCALHOST, "MASTER_PORT": str(port),
            "PET_NNODES": "2", "PET_NPROC_PER_NODE": "2", "PET_NODE_RANK": str(node), "PYTHONUNBUFFERED": "0",
            "HOSTNAME": local[node].name, "DISTCOMP_TEST_MARK": "torch"}, rec
        assert rec["rank_info"] == {"rank": rank, "world_size": 4, "local_rank": local_rank, "local_world_size": 2,
                                    "node_rank": node, "master_addr": LOCALHOST, "master_port": port,
                                    "source": "torch", "role": "worker"}
        assert rec["peers"] == [{"rank": r, "pod": local[r // 2].name, "group_rank": str(r // 2)} for r in range(4)]
        # python rank.py ARGS: the user's words, "$(MASTER_ADDR)" unexpanded (by Kubernetes or a shell)
        assert rec["argv"] == rank_argv(user, str(rank) if shell else None)
        assert rec["cwd"] == str(JOBS / "pytorchjob")


# --- TFJob -------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("shell", [False, True], ids=["words", "shell-line"])
def test_tfjob_pods_all_reduce(tmp_path: Path, shell: bool) -> None:
    """2 Worker pods, each running the user's command with the operator's TF_CONFIG (as a shell
    line: the pod's shell reads $TF_CONFIG)."""
    manifest, user, out = compiled("tfjob", 2, 1, tmp_path, "TF_CONFIG" if shell else None)
    job = manifest["metadata"]["name"]
    pods = tfjob_pods(manifest)
    assert [p.name for p in pods] == [f"{job}-worker-0", f"{job}-worker-1"]
    endpoints = [f"{job}-worker-{i}.default.svc:2222" for i in range(2)]
    configs = [json.loads(p.env["TF_CONFIG"]) for p in pods]
    assert configs == [{"cluster": {"worker": endpoints}, "task": {"type": "worker", "index": i},
                        "environment": "cloud"} for i in range(2)]
    assert [p.argv for p in pods] == [user, user]

    # here: each worker's service is 127.0.0.1 with a port of its own; no GPU
    where = localize_endpoints(endpoints)
    local: list[Pod] = []
    for pod, config in zip(pods, configs):
        config["cluster"] = {role: [where[e] for e in hosts] for role, hosts in config["cluster"].items()}
        pod = pod.with_env(TF_CONFIG=json.dumps(config, separators=(",", ":")))
        local.append(replace(pod, extra_env={"CUDA_VISIBLE_DEVICES": "-1"}))
    done = run_pods(local, JOBS / "tfjob", tmp_path / "logs", timeout=240)
    assert set(done.codes.values()) == {0}, done.explain()

    records = rank_records(out)
    assert sorted(records) == [0, 1], done.explain()
    chief_port = int(where[endpoints[0]].rpartition(":")[2])
    for index, rec in records.items():
        assert (rec["world"], rec["all_reduce"]) == (2, 3.0)
        assert rec["task"] == {"type": "worker", "index": index}
        assert rec["env"]["DISTCOMP_TEST_MARK"] == "tensorflow" and rec["env"]["HOSTNAME"] == local[index].name
        info = rec["rank_info"]
        assert (info["rank"], info["world_size"], info["master_addr"], info["master_port"], info["source"],
                info["role"]) == (index, 2, LOCALHOST, chief_port, "tensorflow", "worker")
        seen = local[index].env["TF_CONFIG"] if shell else None
        assert rec["argv"] == rank_argv(user, seen)  # "$(MASTER_ADDR)" reached the program as written
        assert rec["cwd"] == str(JOBS / "tfjob")


# --- MPIJob ------------------------------------------------------------------------------


def _mpi_job(tmp_path: Path, drop_forward: str | None = None, shell_var: str | None = None) -> tuple[Any, ...]:
    manifest, user, out = compiled("mpijob", 2, 2, tmp_path, shell_var)
    job = manifest["metadata"]["name"]
    if drop_forward:  # a broken manifest: one variable no longer forwarded with -x
        c = manifest["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]
        at = c["command"].index(drop_forward)
        assert c["command"][at - 1] == "-x"
        del c["command"][at - 1:at + 1]
    launcher, workers, hostfile = mpijob_pods(manifest)
    assert [w.name for w in workers] == [f"{job}-worker-0", f"{job}-worker-1"]
    assert hostfile == "".join(f"{job}-worker-{i}.{job}.default.svc slots=2\n" for i in range(2))
    # the workers run sshd for the launcher's mpirun: that is what the ssh stand-in replaces
    assert [w.argv for w in workers] == [["/usr/sbin/sshd", "-De"]] * 2
    assert launcher.env["OMPI_MCA_orte_default_hostfile"] == "/etc/mpi/hostfile"
    local = mpi_on_this_machine(launcher, workers, hostfile, tmp_path)
    done = run_pods([local], JOBS / "mpijob", tmp_path / "logs", timeout=90)
    return done, user, out, [line.split()[0] for line in hostfile.splitlines()], local


@pytest.mark.slow
@pytest.mark.parametrize("shell", [False, True], ids=["words", "shell-line"])
def test_mpijob_launcher_all_reduces_over_the_workers(tmp_path: Path, shell: bool) -> None:
    """The Launcher's mpirun over the operator's hostfile (2 workers x slotsPerWorker 2);
    the workers' sshd is replaced by distcomp's node agent in a fresh env, so the ranks
    see only what mpirun forwards, as over ssh. As a shell line, each rank's shell (started by
    mpirun on its worker) reads the rank's own $OMPI_COMM_WORLD_RANK."""
    done, user, out, nodes, local = _mpi_job(tmp_path, shell_var="OMPI_COMM_WORLD_RANK" if shell else None)
    assert user_part(local.argv, user) == user
    assert done.codes == {local.name: 0}, done.explain()

    records = rank_records(out)
    assert sorted(records) == [0, 1, 2, 3], done.explain()
    for rank, rec in records.items():
        node, local_rank = divmod(rank, 2)  # --map-by slot fills worker 0's slots first
        assert (rec["world"], rec["all_reduce"]) == (4, 10)
        assert rec["env"] == {
            "OMPI_COMM_WORLD_RANK": str(rank), "OMPI_COMM_WORLD_SIZE": "4",
            "OMPI_COMM_WORLD_LOCAL_RANK": str(local_rank), "OMPI_COMM_WORLD_LOCAL_SIZE": "2",
            "DISTCOMP_TEST_MARK": "mpi",  # the spec's variable: it reaches the workers only through -x
            "DISTCOMP_TEST_NODE": nodes[node],  # the rank runs in worker pod `node`
            "K_MPI_JOB_ROLE": None}, rec  # the launcher pod's own env does not reach the ranks
        # the MPI launcher's AZ_BATCH_MASTER_NODE (-x, as in a local run): worker 0's name, a fixed port
        job = local.name.removesuffix("-launcher")
        assert rec["rank_info"] == {"rank": rank, "world_size": 4, "local_rank": local_rank, "local_world_size": 2,
                                    "node_rank": node, "master_addr": f"{job}-worker-0.{job}", "master_port": PORT,
                                    "source": "openmpi", "role": "worker"}
        assert rec["peers"] == [{"rank": r, "node": nodes[r // 2]} for r in range(4)]
        assert rec["argv"] == rank_argv(user, str(rank) if shell else None)  # "$(...)" reached it as written
        assert rec["cwd"] == str(JOBS / "mpijob")


@pytest.mark.slow
def test_mpijob_emulation_catches_a_missing_forward(tmp_path: Path) -> None:
    """The check above has teeth: without ``-x DISTCOMP_TEST_MARK`` the spec's variable
    is in the launcher pod's env but not in the ranks' (the ssh stand-in does not leak it)."""
    done, _, out, _, local = _mpi_job(tmp_path, drop_forward="DISTCOMP_TEST_MARK")
    assert local.env["DISTCOMP_TEST_MARK"] == "mpi"
    assert done.codes == {local.name: 0}, done.explain()
    records = rank_records(out)
    assert sorted(records) == [0, 1, 2, 3], done.explain()
    assert {rec["env"]["DISTCOMP_TEST_MARK"] for rec in records.values()} == {None}


# --- the user's own launcher in the command (seed 003's job style) -----------------------

OWN = Path(__file__).resolve().parents[2] / "launchers" / "jobs" / "own"


def _own(name: str, tmp_path: Path) -> tuple[dict[str, Any], Path]:
    spec = load(str(OWN / f"{name}.yaml"))
    out = tmp_path / "out"
    return compile_job(make_plan(spec, gpu=False, pm=get_plugin_manager()), {}, {"out": str(out)}, pm=get_plugin_manager(), image=IMAGE), out


def _one_world(out: Path, world: int) -> list[dict[str, Any]]:
    records = [json.loads(p.read_text()) for p in sorted(out.glob("rank*.json"))]
    assert [r["rank"] for r in records] == list(range(world)), records
    assert {(r["world"], r["sum"]) for r in records} == {(world, world * (world + 1) / 2)}
    return records


@pytest.mark.slow
def test_the_users_torchrun_runs_once_in_each_pod(tmp_path: Path) -> None:
    """No torchrun of distcomp's around the user's: each pod runs the user's line, whose
    $NODE_RANK is the operator's PET_NODE_RANK; 2 pods x 2 processes make one world."""
    manifest, out = _own("torchrun", tmp_path)
    assert manifest["spec"]["nprocPerNode"] == "2"
    pods = pytorchjob_pods(manifest)
    port = free_ports(1)[0]
    local = [p.with_env(MASTER_ADDR=LOCALHOST, MASTER_PORT=str(port)) for p in pods]
    assert all(p.argv[:2] == ["/bin/sh", "-c"] and "torchrun --nnodes 2" in p.argv[2] for p in local)
    done = run_pods(local, OWN, tmp_path / "logs", timeout=150)
    assert set(done.codes.values()) == {0}, done.explain()
    records = _one_world(out, 4)
    assert [(r["group_rank"], r["node_rank"]) for r in records] == [(0, "0"), (0, "0"), (1, "1"), (1, "1")]


@pytest.mark.slow
def test_the_users_mpirun_runs_once_in_the_launcher_pod(tmp_path: Path) -> None:
    """The Launcher runs the user's own mpirun (no mpirun of distcomp's around it) over the
    operator's hostfile, named by $AZUREML_MPI_HOSTFILE, as root: one world over 2 workers."""
    manifest, out = _own("mpirun", tmp_path)
    launcher, workers, hostfile = mpijob_pods(manifest)
    assert launcher.argv[:2] == ["/bin/sh", "-c"] and launcher.argv[2].startswith("mpirun -np 4 --hostfile ")
    assert launcher.env["AZUREML_MPI_HOSTFILE"] == "/etc/mpi/hostfile"
    local = mpi_on_this_machine(launcher, workers, hostfile, tmp_path)
    done = run_pods([local], OWN, tmp_path / "logs", timeout=90)
    assert done.codes == {local.name: 0}, done.explain()
    assert [r["local_rank"] for r in _one_world(out, 4)] == [0, 1, 0, 1]
