"""A launcher with no Kubeflow mapping compiles and runs: the hookspec's ``mine`` launcher (one
process per node with MY_RANK), installed through its entry point, becomes a PyTorchJob that is
valid against the real CRD, whose pods each run distcomp's node agent, carried in the pod's own
command. Each pod's real command runs here with the env the training operator gives it
(``_operator``): no distcomp on the pod's path, the agent starts that node's replica only."""

from __future__ import annotations

import pytest
import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

from distcomp.core.hookspec import DistcompSpecs

from ..._dists import install
from ...test_plugins import example_code
from ._operator import LOCALHOST, pytorchjob_pods, run_pods
from .test_manifests import validate

RANK = '''\
import json, os, sys
rank = int(os.environ["MY_RANK"])
with open(os.path.join(sys.argv[1], f"rank{rank}.json"), "w") as f:
    json.dump({"rank": rank, "world": os.environ["MY_WORLD"], "pod": os.environ["HOSTNAME"], "msg": sys.argv[3],
               "cwd": os.getcwd(),
               "ranks": [os.environ.get(n) for n in ("DISTCOMP_RANK", "DISTCOMP_WORLD_SIZE", "RANK", "PET_NODE_RANK")]}, f)
print(f"rank {rank} of {os.environ['MY_WORLD']} in {os.environ['HOSTNAME']}", flush=True)
if str(rank) == sys.argv[2]:
    print(f"rank {rank} gives up on purpose", flush=True)
    sys.exit(5)
'''
MESSAGE = "it's $(touch PWNED) & \"two words\""


def _compile(tmp_path: Path, fail_rank: int) -> tuple[dict, Path, Path]:
    site = tmp_path / "site"
    install(site, "mypkg", "mypkg", example_code(DistcompSpecs.distcomp_launchers.__doc__ or ""),
            "[distcomp]\nmine = mypkg\n")
    code, out = tmp_path / "code", tmp_path / "out"
    code.mkdir()
    out.mkdir()
    (code / "rank.py").write_text(RANK)
    (code / "component.yaml").write_text(
        "name: mine-job\ntype: DistributedComponent\n"
        "inputs:\n  dest: {type: String}\n  fail_rank: {type: Integer, default: -1}\n  msg: {type: String}\n"
        "launcher:\n  type: mine\n"
        "  additional_arguments: python rank.py {inputs.dest} {inputs.fail_rank} {inputs.msg}\n")
    env = {**os.environ, "PYTHONPATH": str(site)}
    proc = subprocess.run([sys.executable, "-m", "distcomp", "compile", "--target", "kubeflow",
                           str(code / "component.yaml"), "--nodes", "2", "--image", "python:3.11", "--code", "image",
                           "-i", f"fail_rank={fail_rank}", "-i", f"msg={MESSAGE}", "-i", f"dest={out}"],
                          capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    return yaml.safe_load(proc.stdout), code, out


@pytest.mark.slow
def test_a_plugin_launcher_compiles_to_a_valid_pytorchjob_whose_pods_run_its_ranks(tmp_path: Path) -> None:
    manifest, code, out = _compile(tmp_path, fail_rank=-1)
    validate(manifest)  # the real CRD schema, and nothing the API server would prune
    assert manifest["kind"] == "PyTorchJob"
    assert sorted(manifest["spec"]["pytorchReplicaSpecs"]) == ["Master", "Worker"]
    pods = [p.with_env(MASTER_ADDR=LOCALHOST) for p in pytorchjob_pods(manifest)]
    assert pods[0].argv[:2] == ["python3", "-c"]  # the agent travels in the command: the image needs only Python
    env = pods[0].env
    assert "distcomp" not in env.get("PYTHONPATH", "")
    done = run_pods(pods, code, tmp_path / "logs", timeout=120)
    assert set(done.codes.values()) == {0}, done.explain()
    records = {int(p.stem[4:]): json.loads(p.read_text()) for p in out.glob("rank*.json")}
    assert sorted(records) == [0, 1], done.explain()
    assert {r["pod"] for r in records.values()} == {p.name for p in pods}  # one rank in each pod
    for rank, rec in records.items():
        assert (rec["world"], rec["msg"], rec["cwd"]) == ("2", MESSAGE, str(code))
        assert rec["pod"] == pods[rank].name
        # distcomp's rank contract; the operator's per-pod RANK and PET_* stay with the agent
        assert rec["ranks"] == [str(rank), "2", None, None]
    assert not list(code.glob("PWNED")) and not list(tmp_path.glob("**/PWNED"))
    master_log = done.pods[0].output
    assert "[rank0] rank 0 of 2 in" in master_log and "rank 1" not in master_log


def test_a_failing_rank_fails_its_pod_and_is_named_in_its_log(tmp_path: Path) -> None:
    manifest, code, out = _compile(tmp_path, fail_rank=1)
    pods = [p.with_env(MASTER_ADDR=LOCALHOST) for p in pytorchjob_pods(manifest)]
    done = run_pods(pods, code, tmp_path / "logs", timeout=120)
    worker = done.pods[1]
    assert done.codes[worker.pod.name] not in (0, None), done.explain()
    assert "rank 1 gives up on purpose" in worker.output
    assert "distcomp agent: node 1: rank1 exited with code 5" in worker.output  # the root cause, in the pod's log
