"""A launcher with no Azure ML distribution still compiles: the hookspec's ``mine`` launcher,
installed through its entry point, becomes a command component that azure-ai-ml loads and
validates, with the pytorch distribution at one process per instance, that process distcomp's
node agent. The component's command then runs here as Azure ML would run it: its inputs
substituted into the text, the result run by bash once per instance, with the variables Azure
gives a pytorch process (NODE_RANK, MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from distcomp.core.hookspec import DistcompSpecs
from distcomp.core.plan import make_plan

from ..._dists import install
from ...test_plugins import example_code
from .test_component import azure_load

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore:.*:UserWarning:marshmallow")

RANK = '''\
import json, os, sys
rank = int(os.environ["MY_RANK"])
with open(os.path.join(sys.argv[1], f"rank{rank}.json"), "w") as f:
    json.dump({"rank": rank, "world": os.environ["MY_WORLD"], "node": os.environ["NODE_RANK"], "msg": sys.argv[2],
               "ranks": [os.environ.get(n) for n in ("DISTCOMP_RANK", "DISTCOMP_WORLD_SIZE", "RANK")]}, f)
print(f"rank {rank} of {os.environ['MY_WORLD']}", flush=True)
'''


@pytest.mark.slow
def test_a_plugin_launcher_compiles_to_a_component_azure_validates_and_its_instances_run(tmp_path: Path) -> None:
    site, code, out = tmp_path / "site", tmp_path / "code", tmp_path / "out"
    install(site, "mypkg", "mypkg", example_code(DistcompSpecs.distcomp_launchers.__doc__ or ""),
            "[distcomp]\nmine = mypkg\n")
    code.mkdir()
    out.mkdir()
    (code / "rank.py").write_text(RANK)
    (code / "component.yaml").write_text(
        "name: mine-job\ntype: DistributedComponent\n"
        "inputs:\n  dest: {type: String}\n  msg: {type: String}\n"
        "launcher:\n  type: mine\n  additional_arguments: python rank.py {inputs.dest} {inputs.msg}\n")
    env = {**os.environ, "PYTHONPATH": str(site)}
    proc = subprocess.run([sys.executable, "-m", "distcomp", "compile", "--target", "azureml",
                           str(code / "component.yaml"), "--nodes", "2", "--image", "python:3.11-slim",
                           "--out", str(tmp_path / "az" / "component.yml")],
                          capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    assert "has no Azure ML distribution of its own: each of the 2 instance(s) runs distcomp's node agent" in proc.stderr
    component = azure_load(tmp_path / "az" / "component.yml")  # azure-ai-ml's own loader and validator
    assert component.resources.instance_count == 2
    assert (component.distribution.type, component.distribution.process_count_per_instance) == ("pytorch", 1)

    command = yaml.safe_load((tmp_path / "az" / "component.yml").read_text())["command"]
    assert "${{inputs.dest}} ${{inputs.msg}}" in command  # Azure ML fills the inputs in, as for any component
    line = command.replace("${{inputs.dest}}", str(out)).replace("${{inputs.msg}}", "hello")
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("DISTCOMP", "MLFLOW", "PYTHONPATH"))}
    procs = [subprocess.Popen(["/bin/bash", "-c", line], cwd=code, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              env={**clean, "NODE_RANK": str(n), "RANK": str(n), "WORLD_SIZE": "2", "LOCAL_RANK": "0",
                                   "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "6105"})
             for n in range(2)]
    logs = [p.communicate(timeout=120)[0].decode() for p in procs]
    assert [p.returncode for p in procs] == [0, 0], logs
    records = {int(p.stem[4:]): json.loads(p.read_text()) for p in out.glob("rank*.json")}
    # each rank is placed by distcomp's contract, not by the instance's RANK, which the agent keeps to itself
    assert records == {n: {"rank": n, "world": "2", "node": str(n), "msg": "hello",
                           "ranks": [str(n), "2", None]} for n in range(2)}, logs
    assert "[rank1] rank 1 of 2" in logs[1] and "rank 1" not in logs[0]  # each instance ran its own node's rank


def test_a_layout_that_needs_another_nodes_address_is_refused_at_compile(tmp_path: Path) -> None:
    from distcomp.core.plugins import PluginManager
    from distcomp.spec import loads
    from distcomp.targets.azureml._component import AzureMLTargetError, component_mapping

    pm = PluginManager()
    pm.load_builtins()
    source = example_code(DistcompSpecs.distcomp_launchers.__doc__ or "").replace(
        'env={"MY_RANK": str(i), "MY_WORLD": str(nodes)}', 'env={"PEER": "{{host:1}}"}')
    module = type(sys)("mine_peer")
    exec(compile(source, "mine_peer", "exec"), module.__dict__)
    pm.register_plugin(module, name="mine-peer")
    spec = loads("name: m\ntype: DistributedComponent\nenvironment: azureml:e:1\n"
                 "launcher: {type: mine, additional_arguments: python x.py}\n", base_dir=tmp_path,
                 launchers=pm.alias_table()).with_overrides(nodes=2)
    with pytest.raises(AzureMLTargetError, match=r"needs host:1 \(another node's address\)"):
        component_mapping(make_plan(spec, gpu=False, pm=pm), tmp_path, pm)
