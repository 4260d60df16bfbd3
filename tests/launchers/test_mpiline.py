"""MPI as users write it: seed 003's Open MPI 4 lines (``-bind-to none -map-by slot -mca btl
^openib``) run here on the Open MPI 5 pip installs, simulated nodes never share memory whatever
btl the user names, and seed 004's rank snippet finds what Azure ML sets for MPI jobs.
Real mpirun, real mpi4py ranks, through the real ``distcomp run``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from distcomp.core.mpiline import advice, apart, openmpi4, rewrite, split

from .conftest import JOBS, clean_env

SEED = JOBS / "seed003"
LINES = [line for line in (SEED / "mpirun-lines.txt").read_text().splitlines()
         if line.strip() and not line.startswith("#")]


def test_open_mpi_4_single_dash_options_are_read_as_open_mpi_5_spells_them() -> None:
    line = openmpi4(LINES[0].split())
    assert line.argv == (
        "mpirun", "--np", "16", "--hostfile", "$AZUREML_MPI_HOSTFILE", "--bind-to", "none", "--map-by", "slot",
        "-x", "NCCL_DEBUG=INFO", "-x", "LD_LIBRARY_PATH", "-x", "PATH", "--mca", "pml", "ob1", "--mca", "btl",
        "^openib", "python", "train.py")
    assert line.program == line.argv.index("python") and not line.unknown
    # the program's own words are its own, whatever they look like
    tail = openmpi4(["mpiexec", "-npernode", "2", "-H", "a,b", "prog", "-bind-to", "x", ":", "-np", "1", "p2", "-x"])
    assert tail.argv == ("mpiexec", "--npernode", "2", "-H", "a,b", "prog", "-bind-to", "x", ":", "--np", "1", "p2",
                         "-x")
    # options Open MPI 5 dropped: the harmless ones are left out, renamed ones renamed
    assert openmpi4(["mpirun", "-novm", "-q", "-bind-to-socket", "-rf", "f", "a.out"]).argv == (
        "mpirun", "--bind-to", "package", "--rankfile", "f", "a.out")
    assert split(["mpirun", "--output", "tag", "-mca", "a", "b", "-x", "V", "prog", "-n", "3"]) == 8


def test_validate_names_the_exact_replacement_for_a_word_it_cannot_read(tmp_path: Path) -> None:
    assert advice("mpirun -np 2 -report-bindings -foo-bar 3 python t.py".split()) == [
        "mpirun: '-foo-bar' is not an Open MPI 4 mpirun option, and Open MPI 5 (which runs here) may read it as the "
        "program; if it is an option, write '--foo-bar' (two dashes)"]
    assert advice(["mpirun", "-hnp", "file:x", "a.out"]) == [
        "mpirun: '-hnp' is an Open MPI 4 option that Open MPI 5 (which runs here) does not have; remove it"]
    spec = tmp_path / "job.yml"
    spec.write_text(yaml.safe_dump({"command": "mpirun -np 2 -foo-bar python t.py",
                                    "distributed": {"mpi": {"worker": {"count": 1, "slots_per": 2}}}}))
    proc = subprocess.run([sys.executable, "-m", "distcomp", "validate", str(spec)], capture_output=True, text=True,
                          env=clean_env())
    assert "write '--foo-bar' (two dashes)" in proc.stdout + proc.stderr, proc.stdout + proc.stderr


@pytest.mark.parametrize("argv, env, expected_argv, expected_btl", [
    (["mpirun", "--mca", "btl", "^openib", "p"], {}, ["mpirun", "--mca", "btl", "^openib,sm", "p"], None),
    (["mpirun", "-mca", "btl", "^openib", "p"], {}, ["mpirun", "-mca", "btl", "^openib,sm", "p"], None),
    (["mpirun", "--mca", "btl", "^vader", "p"], {}, ["mpirun", "--mca", "btl", "^vader", "p"], None),
    (["mpirun", "--mca", "btl", "self,sm", "p"], {}, ["mpirun", "--mca", "btl", "self,tcp", "p"], None),
    (["mpirun", "--mca", "btl_tcp_if_include", "lo", "p"], {},
     ["mpirun", "--mca", "btl_tcp_if_include", "lo", "p"], None),
    (["mpirun", "p", "--mca", "btl", "self,sm"], {}, ["mpirun", "p", "--mca", "btl", "self,sm"], None),
    (["mpirun", "p"], {"OMPI_MCA_btl": "^openib"}, ["mpirun", "p"], "^openib,sm"),
    (["mpirun", "p"], {"OMPI_MCA_btl": "self,vader,tcp"}, ["mpirun", "p"], "self,tcp"),
], ids=["--mca", "-mca", "already-apart", "inclusion", "btl_param", "program-args", "env-exclusion",
        "env-inclusion"])
def test_simulated_nodes_stay_apart_whatever_btl_the_user_names(argv: list[str], env: dict[str, str],
                                                                expected_argv: list[str],
                                                                expected_btl: str | None) -> None:
    out, new_env, notes = apart(argv, env)
    assert list(out) == expected_argv
    assert new_env.get("OMPI_MCA_btl") == expected_btl
    assert bool(notes) == (out != tuple(argv) or new_env != env)
    # only where the nodes are simulated: a real cluster keeps the user's btl
    line, same = rewrite(argv, env)
    assert line.argv == openmpi4(argv).argv and same == env


def run(spec: dict, tmp_path: Path, *flags: str) -> tuple[subprocess.CompletedProcess[str], list[dict]]:
    (tmp_path / "src").mkdir(exist_ok=True)
    for name in ("train.py",):
        (tmp_path / "src" / name).write_text((SEED / name).read_text())
    out = tmp_path / "out"
    spec = {**spec, "code": {"path": "./src"},
            "environment_variables": {**spec.get("environment_variables", {}), "OUT": str(out)}}
    (tmp_path / "job.yml").write_text(yaml.safe_dump(spec, sort_keys=False))
    for old in out.glob("rank*.json"):
        old.unlink()
    proc = subprocess.run([sys.executable, "-m", "distcomp", "run", str(tmp_path / "job.yml"), "--no-tracking",
                           "--run-dir", str(tmp_path / "run"), "--timeout", "120", *flags],
                          capture_output=True, text=True, timeout=180, env=clean_env(), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:] + (tmp_path / "run/logs/launcher0.log").read_text()[-3000:]
    return proc, [json.loads((out / f"rank{r}.json").read_text()) for r in range(len(list(out.glob("rank*.json"))))]


def seed_job(command: str) -> dict:
    """Seed 003's MPI job: 4 workers of 4 slots (its slots_per), the command as written."""
    return {"command": command, "environment": {"docker": {"image": "docker.io/pytorch"}},
            "distributed": {"mpi": {"worker": {"count": 4, "slots_per": 4}}},
            "compute": {"infrastructure": "managed", "instance_type": "Standard_NC24"}}


def one_world(records: list[dict], world: int) -> None:
    assert [r["rank"] for r in records] == list(range(world)), records
    assert {(r["world"], r["sum"]) for r in records} == {(world, world * (world + 1) // 2)}
    assert [r["local_rank"] for r in records] == [r % 4 for r in range(world)]  # 4 slots on each of 4 nodes


@pytest.mark.slow
@pytest.mark.parametrize("line", LINES, ids=["mpi-job", "k8s"])
def test_each_seed_003_mpirun_line_runs_as_written(tmp_path: Path, line: str) -> None:
    proc, records = run(seed_job(line), tmp_path)
    one_world(records, 16)
    assert all(r["btl"] == "^openib,sm" for r in records)  # the user's btl, kept off shared memory
    assert "-bind-to -> --bind-to" in (tmp_path / "run/logs/launcher0.log").read_text()


# the seed's jobs as written, 10 runs out of 10 each (before this rewrite most crashed with a
# SIGSEGV in mca_btl_sm_poll_handle_frag): tests/launchers/test_mpi_slots.py


@pytest.mark.slow
def test_a_btl_in_the_environment_keeps_simulated_nodes_apart(tmp_path: Path) -> None:
    """distcomp's own mpirun, 2 simulated nodes; the user's OMPI_MCA_btl names shared memory."""
    spec = {"type": "command", "command": "python train.py", "distribution": {"type": "mpi",
            "process_count_per_instance": 2}, "resources": {"instance_count": 2}}
    spec_env = {"OMPI_MCA_btl": "self,vader,tcp"}
    proc, records = run({**spec, "environment_variables": spec_env}, tmp_path)
    assert [r["rank"] for r in records] == [0, 1, 2, 3]
    assert {r["btl"] for r in records} == {"self,tcp"}
    assert "OMPI_MCA_btl=self,vader,tcp runs as OMPI_MCA_btl=self,tcp" in proc.stdout + proc.stderr + \
        (tmp_path / "run/logs/launcher0.log").read_text()


@pytest.mark.slow
def test_seed_004_snippet_reads_what_azure_sets_for_mpi_ranks(tmp_path: Path) -> None:
    """Both branches of the snippet, on 2 simulated nodes x 2 ranks: AZ_BATCHAI_MPI_MASTER_NODE is
    the first node, NCCL_SOCKET_IFNAME the interface every simulated node shares (lo)."""
    (tmp_path / "src").mkdir()
    for name in ("aml_env.py", "rank.py"):
        (tmp_path / "src" / name).write_text((JOBS / "seed004" / name).read_text())
    spec = {"type": "command", "command": "python rank.py", "code": {"path": "./src"},
            "environment_variables": {"OUT": str(tmp_path / "out")},
            "distribution": {"type": "mpi", "process_count_per_instance": 2}, "resources": {"instance_count": 2}}
    (tmp_path / "job.yml").write_text(yaml.safe_dump(spec))
    proc = subprocess.run([sys.executable, "-m", "distcomp", "run", str(tmp_path / "job.yml"), "--no-tracking",
                           "--run-dir", str(tmp_path / "run"), "--timeout", "120"],
                          capture_output=True, text=True, timeout=180, env=clean_env(), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    records = [json.loads((tmp_path / "out" / f"rank{r}.json").read_text()) for r in range(4)]
    master = records[0]["batch_master"].split(":")[0]
    assert master == "127.0.0.1"
    for r, rec in enumerate(records):
        assert (rec["rank"], rec["world"], rec["local_size"]) == (r, 4, 2)
        assert rec["nccl_socket_ifname"] == "lo" and rec["master_node"] == master
        assert rec["seen"]["single"] == {"RANK": str(r), "WORLD_SIZE": "4", "MASTER_ADDR": master,
                                         "MASTER_PORT": "54965"}
        assert rec["seen"]["multi"]["MASTER_ADDR"] == master
        assert "NCCL_SOCKET_IFNAME original value = lo" in proc.stdout
