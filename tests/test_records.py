"""The records plugins exchange with distcomp (LauncherType, Replica, Topology, placeholders)
and the Topologies the built-in launchers make of real specs."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from distcomp.launchers.deepspeed import deepspeed_topology
from distcomp.launchers.mpi import NODE_AGENT, mpi_topology, prterun_shim
from distcomp.launchers.tensorflow import tf_topology
from distcomp.launchers.torch import rank_topology
from distcomp.records import (
    COMMAND, JOB_DIR, JOB_ID, MAX_RESTARTS, RESTART, LauncherType, PlaceholderError, Replica, Topology, bind, host,
    node_name, placeholders, port,
)
from distcomp.spec import ComponentSpec, loads


def factory(spec: ComponentSpec) -> Topology:  # a valid factory for LauncherType tests
    raise AssertionError("not called")


def worker(index: int = 0, **kw) -> Replica:  # type: ignore[no-untyped-def]
    return Replica(role="worker", index=index, node=0, **kw)


def topo(**kw) -> Topology:  # type: ignore[no-untyped-def]
    args = dict(launcher="x", nodes=1, processes_per_node=1, world_size=1, replicas=(worker(),))
    args.update(kw)
    return Topology(**args)


# -- placeholders ---------------------------------------------------------------------------

def test_placeholder_helpers_spell_the_placeholders() -> None:
    assert host(0) == "{{host:0}}"
    assert host(12) == "{{host:12}}"
    assert node_name(3) == "{{node:3}}"
    assert port("master") == "{{port:master}}"
    assert port("worker-1") == "{{port:worker-1}}"
    assert (COMMAND, JOB_DIR, JOB_ID, RESTART, MAX_RESTARTS) == (
        "{{command}}", "{{job_dir}}", "{{job_id}}", "{{restart}}", "{{max_restarts}}")


def test_placeholders_lists_kind_and_arg() -> None:
    text = f"{host(0)}:{port('master')} {JOB_DIR}/hostfile {COMMAND} {{{{x}}}} {{{{host}}}}"
    assert placeholders(text) == [("host", "0"), ("port", "master"), ("job_dir", None), ("command", None),
                                  ("host", None)]


def test_bind_fills_every_placeholder() -> None:
    values = {"host:0": "10.0.0.1", "port:master": "29500", "job_dir": "/jobs/j1", "node:1": "n1",
              "job_id": "j1", "restart": "2", "max_restarts": "3"}
    text = f"{host(0)}:{port('master')} {JOB_DIR}/hostfile {node_name(1)} slots=2 {JOB_ID} {RESTART}/{MAX_RESTARTS}"
    assert bind(text, values) == "10.0.0.1:29500 /jobs/j1/hostfile n1 slots=2 j1 2/3"


def test_bind_leaves_unrelated_braces_alone() -> None:
    text = "{{x}} {{ host:0 }} {{host:0}} {{HOST:0}} {{port:a b}} {single} {{jinja | default('a')}}"
    assert bind(text, {"host:0": "h"}) == "{{x}} {{ host:0 }} h {{HOST:0}} {{port:a b}} {single} {{jinja | default('a')}}"
    assert bind("no placeholders {{x}}", {}) == "no placeholders {{x}}"


def test_bind_does_not_rebind_values() -> None:
    # a value that looks like a placeholder is inserted as is, never bound again
    assert bind(f"{host(0)} {host(1)}", {"host:0": "{{host:1}}", "host:1": "b"}) == "{{host:1}} b"


@pytest.mark.parametrize("text, missing", [
    ("{{host:1}}", "{{host:1}}"),
    ("a {{port:master}} b", "{{port:master}}"),
    ("{{job_dir}}/x", "{{job_dir}}"),
    ("{{port}}", "{{port}}"),  # the arg matters: port:x given, bare port is missing
])
def test_bind_missing_value_raises(text: str, missing: str) -> None:
    with pytest.raises(PlaceholderError) as info:
        bind(text, {"host:0": "h", "port:x": "1"})
    assert str(info.value) == f"no value for placeholder {missing}"
    assert isinstance(info.value, ValueError)


# -- LauncherType -----------------------------------------------------------------------------

def test_launcher_type_minimal() -> None:
    lt = LauncherType(name="mine", factory=factory)
    assert (lt.name, lt.aliases, lt.description) == ("mine", (), "")
    assert tuple(lt.names()) == ("mine",)


def test_launcher_type_aliases_normalised() -> None:
    lt = LauncherType(name="mine", factory=factory, aliases=["my-launcher", "mine", "m.2", "my-launcher", "m_x"])
    assert lt.aliases == ("my-launcher", "m.2", "m_x")  # a tuple, without the name and without repeats
    assert tuple(lt.names()) == ("mine", "my-launcher", "m.2", "m_x")
    assert LauncherType(name="mine", factory=factory, aliases="mi").aliases == ("mi",)  # one string, not letters


@pytest.mark.parametrize("bad", ["", "Mine", "1mine", "-mine", ".mine", "my launcher", "my/launcher", "mïne",
                                 "mine!", "_mine", "mine\n"])
def test_launcher_type_bad_name(bad: str) -> None:
    with pytest.raises(ValueError) as info:
        LauncherType(name=bad, factory=factory)
    assert str(info.value) == (f"LauncherType name {bad!r}: expected lowercase letters, digits, '.', '_' or '-',"
                               " starting with a letter")


@pytest.mark.parametrize("bad", ["PyTorch", "my alias", "", 3])
def test_launcher_type_bad_alias(bad: object) -> None:
    with pytest.raises(ValueError) as info:
        LauncherType(name="mine", factory=factory, aliases=("ok", bad))  # type: ignore[arg-type]
    assert str(info.value) == (f"LauncherType name {bad!r}: expected lowercase letters, digits, '.', '_' or '-',"
                               " starting with a letter")


def test_launcher_type_non_string_name() -> None:
    with pytest.raises(ValueError) as info:
        LauncherType(name=None, factory=factory)  # type: ignore[arg-type]
    assert str(info.value).startswith("LauncherType name None: expected lowercase letters")


@pytest.mark.parametrize("bad, kind", [(None, "NoneType"), ("mpi_topology", "str"), (42, "int")])
def test_launcher_type_factory_must_be_callable(bad: object, kind: str) -> None:
    with pytest.raises(ValueError) as info:
        LauncherType(name="mine", factory=bad)  # type: ignore[arg-type]
    assert str(info.value) == f"LauncherType 'mine': factory must be callable (got {kind})"


def test_launcher_type_is_frozen() -> None:
    lt = LauncherType(name="mine", factory=factory)
    with pytest.raises(dataclasses.FrozenInstanceError):
        lt.name = "other"  # type: ignore[misc]


# -- Replica ----------------------------------------------------------------------------------

def test_replica_defaults_and_name() -> None:
    r = worker(3)
    assert r.argv == (COMMAND,)
    assert dict(r.env) == {}
    assert (r.rank, r.ranks, r.service, r.output, r.failure) == (None, 1, False, None, None)
    assert r.name == "worker3"
    assert worker(3, rank=7).name == "rank7"
    assert Replica(role="ps", index=0, node=0, service=True).name == "ps0"


def test_replica_argv_list_becomes_tuple() -> None:
    r = Replica(role="launcher", index=0, node=0, argv=["mpirun", "-np", "2", COMMAND])
    assert r.argv == ("mpirun", "-np", "2", COMMAND)


@pytest.mark.parametrize("argv", [
    ("python", "train.py"),                 # no COMMAND
    (COMMAND, COMMAND),                      # twice
    ("wrap", COMMAND, "--", COMMAND),        # twice, apart
    ("sh", "-c", f"exec {COMMAND}"),         # not a whole item
])
def test_replica_command_exactly_once_as_whole_item(argv: tuple[str, ...]) -> None:
    with pytest.raises(ValueError) as info:
        worker(2, argv=argv)
    assert str(info.value) == "Replica worker2: argv must hold {{command}} exactly once, as a whole item"


@pytest.mark.parametrize("argv", [(), [], (COMMAND, 3), (COMMAND, None)])
def test_replica_argv_must_be_nonempty_strings(argv: object) -> None:
    with pytest.raises(ValueError) as info:
        worker(argv=argv)
    assert str(info.value) == "Replica worker0: argv must be a non-empty list of strings"


@pytest.mark.parametrize("role", ["Worker", "", "1worker", "work er", "worker.x", "-w"])
def test_replica_bad_role(role: str) -> None:
    with pytest.raises(ValueError) as info:
        Replica(role=role, index=0, node=0)
    assert str(info.value) == f"Replica.role {role!r}: expected lowercase letters, digits, '_' or '-'"


@pytest.mark.parametrize("kw", [dict(index=-1), dict(node=-1), dict(ranks=0), dict(ranks=-2)])
def test_replica_negative_index_node_or_no_ranks(kw: dict[str, int]) -> None:
    args = dict(role="worker", index=0, node=0)
    args.update(kw)
    with pytest.raises(ValueError) as info:
        Replica(**args)  # type: ignore[arg-type]
    assert str(info.value) == f"Replica worker{args['index']}: index and node must be >= 0 and ranks >= 1"


@pytest.mark.parametrize("name", ["1ABC", "A-B", "A B", "", "A=B", "Ä", "RANK\n"])
def test_replica_bad_env_name(name: str) -> None:
    with pytest.raises(ValueError) as info:
        worker(1, env={"OK": "1", name: "x"})
    assert str(info.value) == f"Replica worker1 env: {name!r} is not an environment variable name"


def test_replica_non_string_env_name() -> None:
    with pytest.raises(ValueError) as info:
        worker(env={1: "x"})  # type: ignore[dict-item]
    assert str(info.value) == "Replica worker0 env: 1 is not an environment variable name"


@pytest.mark.parametrize("value, kind", [(1, "int"), (None, "NoneType"), (b"x", "bytes"), (True, "bool")])
def test_replica_env_values_must_be_strings(value: object, kind: str) -> None:
    with pytest.raises(ValueError) as info:
        worker(env={"RANK": value})  # type: ignore[dict-item]
    assert str(info.value) == f"Replica worker0 env: RANK={value!r} must be a string (got {kind})"


def test_replica_env_accepts_valid_names() -> None:
    env = {"_X": "", "a1": "v", "LONG_NAME_2": "{{host:0}}"}
    assert dict(worker(env=env).env) == env


def test_replica_is_frozen_and_copies_env() -> None:
    env = {"RANK": "0"}
    r = worker(env=env)
    env["RANK"] = "9"
    env["EXTRA"] = "1"
    assert dict(r.env) == {"RANK": "0"}
    with pytest.raises(TypeError):
        r.env["RANK"] = "1"  # type: ignore[index]
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.role = "ps"  # type: ignore[misc]


# -- Topology ---------------------------------------------------------------------------------

def test_topology_minimal_and_roles() -> None:
    t = topo(replicas=[Replica(role="chief", index=0, node=0), worker(0), worker(1),
                       Replica(role="ps", index=0, node=0, service=True)], world_size=3)
    assert isinstance(t.replicas, tuple) and len(t.replicas) == 4
    assert t.roles() == {"chief": 1, "worker": 2, "ps": 1}
    assert (dict(t.files), t.ports, dict(t.local_env)) == ({}, (), {})


@pytest.mark.parametrize("kw", [dict(nodes=0), dict(processes_per_node=0), dict(world_size=0), dict(nodes=-1)])
def test_topology_counts_at_least_one(kw: dict[str, int]) -> None:
    with pytest.raises(ValueError) as info:
        topo(**kw)
    assert str(info.value) == "Topology: nodes, processes_per_node and world_size must be >= 1"


@pytest.mark.parametrize("replicas", [(), [], (Replica(role="ps", index=0, node=0, service=True),),
                                      (Replica(role="ps", index=0, node=0, service=True),
                                       Replica(role="evaluator", index=0, node=0, service=True))])
def test_topology_needs_a_non_service_replica(replicas: tuple[Replica, ...]) -> None:
    with pytest.raises(ValueError) as info:
        topo(replicas=replicas)
    assert str(info.value) == "Topology: needs at least one replica that is not a service"


def test_topology_duplicate_role_and_index() -> None:
    with pytest.raises(ValueError) as info:
        topo(replicas=(worker(0), Replica(role="worker", index=0, node=1)))
    assert str(info.value) == "Topology: two replicas share a role and index"
    # same index in different roles is fine
    assert len(topo(replicas=(worker(0), Replica(role="ps", index=0, node=0, service=True))).replicas) == 2


def test_topology_undeclared_ports() -> None:
    r = worker(env={"MASTER_PORT": port("master"), "OTHER": f"{host(0)}:{port('b')}"},
               argv=("x", f"--port={port('a')}", COMMAND))
    with pytest.raises(ValueError) as info:
        topo(replicas=(r,), ports=("master",))
    assert str(info.value) == "Topology: ports used but not declared in Topology.ports: a, b"
    assert topo(replicas=(r,), ports=["master", "a", "b"]).ports == ("master", "a", "b")


def test_topology_undeclared_port_in_files() -> None:
    with pytest.raises(ValueError) as info:
        topo(files={"hostfile": f"{host(0)}:{port('rdzv')}\n"})
    assert str(info.value) == "Topology: ports used but not declared in Topology.ports: rdzv"
    assert dict(topo(files={"hostfile": port("rdzv")}, ports=("rdzv",)).files) == {"hostfile": "{{port:rdzv}}"}


def test_topology_bare_port_placeholder_is_undeclared() -> None:
    with pytest.raises(ValueError) as info:
        topo(replicas=(worker(env={"P": "{{port}}"}),))
    assert str(info.value) == "Topology: ports used but not declared in Topology.ports: None"


@pytest.mark.parametrize("name", ["a/b", "../x", "..", ".", "", "sub/hostfile", "host file", "x\\y", "/etc/passwd",
                                  "hostfile\n"])
def test_topology_bad_file_names(name: str) -> None:
    with pytest.raises(ValueError) as info:
        topo(files={"ok.txt": "", name: "x"})
    assert str(info.value) == f"Topology.files: {name!r} must be a plain file name"


def test_topology_good_file_names() -> None:
    files = {"hostfile": "a", "tf_config.json": "b", ".hidden": "c", "A-1_b": "d"}
    assert dict(topo(files=files).files) == files


def test_topology_bad_local_env() -> None:
    with pytest.raises(ValueError) as info:
        topo(local_env={"OMP_NUM_THREADS": 1})
    assert str(info.value) == "Topology.local_env: OMP_NUM_THREADS=1 must be a string (got int)"
    with pytest.raises(ValueError) as info:
        topo(local_env={"BAD NAME": "1"})
    assert str(info.value) == "Topology.local_env: 'BAD NAME' is not an environment variable name"


def test_topology_is_frozen_and_copies_dicts() -> None:
    files = {"hostfile": "a"}
    local_env = {"OMP_NUM_THREADS": "1"}
    ports = ["master"]
    replicas = [worker(env={"P": port("master")})]
    t = topo(files=files, local_env=local_env, ports=ports, replicas=replicas)
    files["hostfile"] = "changed"
    files["new"] = "x"
    local_env["OMP_NUM_THREADS"] = "8"
    ports.append("other")
    replicas.append(worker(1))
    assert dict(t.files) == {"hostfile": "a"}
    assert dict(t.local_env) == {"OMP_NUM_THREADS": "1"}
    assert t.ports == ("master",)
    assert len(t.replicas) == 1
    with pytest.raises(TypeError):
        t.files["hostfile"] = "x"  # type: ignore[index]
    with pytest.raises(TypeError):
        t.local_env["X"] = "x"  # type: ignore[index]
    with pytest.raises(dataclasses.FrozenInstanceError):
        t.nodes = 2  # type: ignore[misc]


# -- built-in topologies from real specs ------------------------------------------------------

def sdk(tmp_path: Path, launcher: str, extra: str = "", top: str = "") -> ComponentSpec:
    text = (f"name: job\ntype: DistributedComponent\nlauncher:\n  type: {launcher}\n{extra}"
            f"  additional_arguments: python train.py --lr 0.1\n{top}")
    return loads(text, file="component.yaml", base_dir=tmp_path)


def all_values(t: Topology, job_dir: str = "/jobs/j1") -> dict[str, str]:
    values = {"job_dir": job_dir, "job_id": "j1", "restart": "0", "max_restarts": "0"}
    values.update({f"host:{n}": f"10.0.0.{n + 1}" for n in range(t.nodes)})
    values.update({f"node:{n}": f"node{n}" for n in range(t.nodes)})
    values.update({f"port:{p}": str(20000 + i) for i, p in enumerate(t.ports)})
    return values


def test_torch_two_nodes_two_processes(tmp_path: Path) -> None:
    spec = sdk(tmp_path, "PyTorch", "  node_count: 2\n  process_count_per_node: 2\n")
    assert spec.distribution.launcher == "torch.distributed"
    t = rank_topology(spec)
    assert (t.launcher, t.nodes, t.processes_per_node, t.world_size) == ("torch.distributed", 2, 2, 4)
    assert t.ports == ("master",)
    assert dict(t.local_env) == {"OMP_NUM_THREADS": "1"}
    assert dict(t.files) == {}
    assert t.roles() == {"worker": 4}
    assert [(r.role, r.index, r.node, r.rank, r.name, r.argv, r.service) for r in t.replicas] == [
        ("worker", i, i // 2, i, f"rank{i}", (COMMAND,), False) for i in range(4)]
    got = [{k: r.env[k] for k in ("RANK", "LOCAL_RANK", "NODE_RANK", "GROUP_RANK", "WORLD_SIZE",
                                  "LOCAL_WORLD_SIZE", "GROUP_WORLD_SIZE", "ROLE_RANK", "ROLE_WORLD_SIZE")}
           for r in t.replicas]
    assert got == [
        {"RANK": str(rank), "LOCAL_RANK": str(rank % 2), "NODE_RANK": str(rank // 2), "GROUP_RANK": str(rank // 2),
         "WORLD_SIZE": "4", "LOCAL_WORLD_SIZE": "2", "GROUP_WORLD_SIZE": "2", "ROLE_RANK": str(rank),
         "ROLE_WORLD_SIZE": "4"} for rank in range(4)]
    r3 = t.replicas[3]
    assert r3.env["MASTER_ADDR"] == "{{host:0}}" and r3.env["MASTER_PORT"] == "{{port:master}}"
    assert (r3.env["TORCHELASTIC_RESTART_COUNT"], r3.env["TORCHELASTIC_MAX_RESTARTS"],
            r3.env["TORCHELASTIC_RUN_ID"]) == (RESTART, MAX_RESTARTS, JOB_ID)
    bound = {k: bind(v, all_values(t)) for k, v in r3.env.items()}
    assert (bound["MASTER_ADDR"], bound["MASTER_PORT"], bound["TORCHELASTIC_RUN_ID"]) == ("10.0.0.1", "20000", "j1")


def test_torch_single_process_has_no_thread_default(tmp_path: Path) -> None:
    t = rank_topology(sdk(tmp_path, "torch"))
    assert (t.nodes, t.processes_per_node, t.world_size, len(t.replicas)) == (1, 1, 1, 1)
    assert dict(t.local_env) == {}
    assert t.replicas[0].env["RANK"] == "0" and t.replicas[0].env["WORLD_SIZE"] == "1"


def test_deepspeed_is_the_torch_contract(tmp_path: Path) -> None:
    spec = sdk(tmp_path, "deepspeed", "  node_count: 2\n  process_count_per_node: 3\n")
    t = deepspeed_topology(spec)
    assert (t.launcher, t.world_size, len(t.replicas)) == ("deepspeed", 6, 6)
    torch = rank_topology(spec)
    assert dataclasses.replace(t, launcher="torch.distributed", local_env=torch.local_env) == torch
    # without a GPU DeepSpeed is told to use its CPU accelerator instead of probing for CUDA
    extra = {} if Path("/dev/nvidiactl").exists() else {"DS_ACCELERATOR": "cpu"}
    assert dict(t.local_env) == {**torch.local_env, **extra}


def test_mpi_two_nodes_two_slots(tmp_path: Path) -> None:
    spec = sdk(tmp_path, "horovod", "  node_count: 2\n  process_count_per_node: 2\n",
               "environment_variables: {NCCL_DEBUG: INFO}\n")
    assert spec.distribution.launcher == "mpi"
    t = mpi_topology(spec)
    assert (t.launcher, t.nodes, t.processes_per_node, t.world_size) == ("mpi", 2, 2, 4)
    assert len(t.replicas) == 1
    r = t.replicas[0]
    assert (r.role, r.index, r.node, r.rank, r.ranks, r.name) == ("launcher", 0, 0, None, 4, "launcher0")
    assert r.output is not None and r.output(b"[1,3]<stdout>: loss 0.5") == (3, b"loss 0.5")
    assert r.argv == ("mpirun", "--allow-run-as-root", "--hostfile", "{{job_dir}}/hostfile", "--np", "4",
                      "--map-by", "slot", "--output", "tag",
                      "-x", "AZUREML_MPI_HOSTFILE", "-x", "AZ_BATCHAI_MPI_MASTER_NODE", "-x", "AZ_BATCH_MASTER_NODE",
                      "-x", "NCCL_DEBUG", COMMAND)
    # PRTE_MCA_ras: mpirun's slots are the hostfile's, not a Slurm step's (mpirun's own, not forwarded)
    assert dict(r.env) == {"AZUREML_MPI_HOSTFILE": "{{job_dir}}/hostfile", "AZ_BATCH_MASTER_NODE": "{{host:0}}:{{port:master}}",
                           "AZ_BATCHAI_MPI_MASTER_NODE": "{{host:0}}", "PRTE_MCA_ras": "^slurm"}
    assert dict(t.files) == {"hostfile": "{{node:0}} slots=2\n{{node:1}} slots=2\n"}
    assert t.ports == ("master",)
    shim = prterun_shim()  # distcomp-prterun: every mpirun line here passes mpiline.rewrite
    assert shim is not None and Path(shim).name == "distcomp-prterun"
    assert dict(t.local_env) == {"PRTE_MCA_plm_ssh_agent": f"/bin/sh {NODE_AGENT}", "OMP_NUM_THREADS": "1",
                                 "OMPI_MCA_btl": "self,tcp", "OMPI_MCA_coll": "^han", "OMPI_PRTERUN": shim,
                                 "DISTCOMP_MPI_NODES_SHARE_HOST": "1", "NCCL_SOCKET_IFNAME": "lo"}
    assert NODE_AGENT.is_file()
    assert bind(t.files["hostfile"], all_values(t)) == "node0 slots=2\nnode1 slots=2\n"
    assert bind(r.env["AZ_BATCH_MASTER_NODE"], all_values(t)) == "10.0.0.1:20000"


def test_mpi_one_node_one_slot(tmp_path: Path) -> None:
    t = mpi_topology(sdk(tmp_path, "mpi"))
    assert t.world_size == 1
    assert t.replicas[0].argv[4:6] == ("--np", "1")
    assert dict(t.files) == {"hostfile": "{{node:0}} slots=1\n"}
    assert dict(t.local_env) == {"OMPI_PRTERUN": prterun_shim(), "NCCL_SOCKET_IFNAME": "lo"}  # one node: no sharing


def test_tensorflow_parameter_servers_as_azure_ml_lays_them_out(tmp_path: Path) -> None:
    """Azure ML's tensorflow distribution: worker_count workers and parameter_server_count ps,
    no chief (worker 0 leads), on every target alike."""
    spec = sdk(tmp_path, "tf", "  node_count: 2\n  worker_count: 4\n  parameter_server_count: 1\n")
    assert spec.distribution.launcher == "tensorflow.distributed"
    t = tf_topology(spec)
    # 4 workers over 2 nodes: 2 processes per node
    assert (t.launcher, t.nodes, t.processes_per_node, t.world_size) == ("tensorflow.distributed", 2, 2, 4)
    assert t.roles() == {"worker": 4, "ps": 1}
    assert [(r.role, r.index, r.node, r.rank, r.service) for r in t.replicas] == [
        ("worker", 0, 0, 0, False), ("worker", 1, 0, 1, False), ("worker", 2, 1, 2, False), ("worker", 3, 1, 3, False),
        ("ps", 0, 0, None, True)]
    assert [r.name for r in t.replicas] == ["rank0", "rank1", "rank2", "rank3", "ps0"]
    assert t.ports == ("worker-0", "worker-1", "worker-2", "worker-3", "ps-0")
    values = all_values(t)
    configs = [json.loads(bind(r.env["TF_CONFIG"], values)) for r in t.replicas]
    cluster = {"worker": ["10.0.0.1:20000", "10.0.0.1:20001", "10.0.0.2:20002", "10.0.0.2:20003"],
               "ps": ["10.0.0.1:20004"]}
    assert configs == [{"cluster": cluster, "task": {"type": r.role, "index": r.index}, "environment": "cloud"}
                       for r in t.replicas]
    assert all(set(r.env) == {"TF_CONFIG"} and r.argv == (COMMAND,) for r in t.replicas)


def test_tensorflow_without_parameter_servers_has_no_chief(tmp_path: Path) -> None:
    t = tf_topology(sdk(tmp_path, "tensorflow", "  node_count: 1\n  process_count_per_node: 3\n"))
    assert t.roles() == {"worker": 3}
    assert t.world_size == 3
    assert [r.rank for r in t.replicas] == [0, 1, 2]
    assert not any(r.service for r in t.replicas)
    config = json.loads(bind(t.replicas[2].env["TF_CONFIG"], all_values(t)))
    assert config == {"cluster": {"worker": ["10.0.0.1:20000", "10.0.0.1:20001", "10.0.0.1:20002"]},
                      "task": {"type": "worker", "index": 2}, "environment": "cloud"}


def test_tensorflow_declared_chief_and_evaluator(tmp_path: Path) -> None:
    text = ("command: python train.py\ndistributed:\n  tensorflow:\n    worker: {count: 2}\n    chief: {count: 1}\n"
            "    evaluator: {count: 1}\n")
    t = tf_topology(loads(text, base_dir=tmp_path))
    assert [(r.role, r.index, r.node, r.rank, r.service) for r in t.replicas] == [
        ("chief", 0, 0, 0, False), ("worker", 0, 0, 1, False), ("worker", 1, 1, 2, False),
        ("evaluator", 0, 0, None, True)]
    assert t.world_size == 3
    assert t.ports == ("chief-0", "worker-0", "worker-1")  # the evaluator is outside the cluster
    configs = [json.loads(bind(r.env["TF_CONFIG"], all_values(t))) for r in t.replicas]
    cluster = {"chief": ["10.0.0.1:20000"], "worker": ["10.0.0.1:20001", "10.0.0.2:20002"]}
    assert configs == [{"cluster": cluster, "task": {"type": r.role, "index": r.index}, "environment": "cloud"}
                       for r in t.replicas]


def test_a_kubeflow_job_record_carries_what_submit_needs() -> None:
    from distcomp.records import KubeflowJobType

    def build(spec: ComponentSpec, options: object) -> dict[str, object]:
        return {}

    job = KubeflowJobType("mine", "SoloJob", build, api_version="example.org/v1",
                          leader="example.org/job={name},example.org/role=leader")
    assert (job.plural, job.group, job.version, job.runtime) == ("solojobs", "example.org", "v1", None)
    assert job.leader_selector("run-7") == "example.org/job=run-7,example.org/role=leader"
    assert KubeflowJobType("mine", "TrainJob", build, runtime="torch-distributed").runtime == "torch-distributed"
    for bad, match in [({"kind": "solo job"}, "Kubernetes kind"), ({"api_version": "v1"}, "GROUP/VERSION"),
                       ({"plural": "Solo_Jobs"}, "lowercase resource name"), ({"runtime": "Torch"}, "Trainer runtime")]:
        with pytest.raises(ValueError, match=match):
            KubeflowJobType(**{"launcher": "mine", "kind": "SoloJob", "build": build, **bad})  # type: ignore[arg-type]


def test_the_mpi_launcher_reads_its_own_output_and_failures() -> None:
    """Open MPI's --output tag and mpirun's failure reports are parsed by the MPI launcher,
    which hands the parsers to targets through its Replica (the local target names no launcher)."""
    from distcomp.launchers.mpi import openmpi_failure, openmpi_rank_line
    from distcomp.records import RankFailure

    assert openmpi_rank_line(b"[4242,1]<stderr>:boom") == (1, b"boom")
    assert openmpi_rank_line(b"--------------------------------") is None  # mpirun's own line
    exit_text = ("prterun detected that one or more processes exited with non-zero status, thus causing the job to "
                 "be terminated. The first process to do so was: Process name: [prterun-host-1@1,1] Exit code: 3")
    assert openmpi_failure(exit_text) == RankFailure(1, 3, "mpirun: rank 1 exited with code 3")
    signal_text = "prterun noticed that process rank 0 with PID 977 on node host exited on signal 9 (Killed)."
    assert openmpi_failure(signal_text) == RankFailure(0, -9, "mpirun: rank 0 (pid 977) exited on signal 9", 977)
    abort_text = 'process rank 1 with PID 31 on node host calling "abort"'
    found = openmpi_failure(abort_text)
    assert found is not None and (found.rank, found.exit_code, found.pid) == (1, None, 31)
    assert openmpi_failure("all ranks finished") is None
    with pytest.raises(ValueError, match="output must be a function"):
        Replica(role="launcher", index=0, node=0, output="openmpi-tagged")  # type: ignore[arg-type]


def test_a_rank_prefix_routes_as_output_does_and_is_checked() -> None:
    from distcomp.launchers.mpi import RANK_PREFIX, openmpi_rank_line

    wrapper = Replica(role="launcher", index=0, node=0, ranks=2, rank_prefix=RANK_PREFIX)
    assert wrapper.output is not None  # derived from the data, as the node agent routes
    for raw in (b"[1,1]<stdout>: hello", b"[3,0]<stderr>:x", b"mpirun: done", b"[1,x]<stdout>: no"):
        assert wrapper.output(raw) == openmpi_rank_line(raw)
    with pytest.raises(ValueError, match="needs a group named 'rank'"):
        Replica(role="launcher", index=0, node=0, rank_prefix=r"^\[(\d+)\]")
    with pytest.raises(ValueError, match="not an ASCII regular expression"):
        Replica(role="launcher", index=0, node=0, rank_prefix="(?P<rank>")
