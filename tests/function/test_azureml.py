"""A function component compiled for Azure ML (``distcomp compile proj/train.py:train --target
azureml``, and ``distcomp.compile(train, "azureml")`` in a user's script: the same component),
loaded and validated by azure-ai-ml itself, its code folder the function's project. Then its
command runs here as Azure ML runs it: the inputs' text put into it, the result run by bash in
the code folder once per process of the pytorch distribution (2 instances x 2), each with the
variables Azure ML gives it; every process calls the function with typed values."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ..targets._jobs import clean_env
from ..targets.azureml.test_component import azure_load
from ..targets.kubeflow._operator import free_ports, rank_records
from .conftest import WAIT, distcomp, explain

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore:.*:UserWarning:marshmallow")

IMAGE = "registry.example/distcomp-torch:1"
# what Azure ML puts in for each input (its text, as the job gives it); "data" is left out
GIVEN = {"epochs": "2", "lr": "0.25", "amp": "True", "mode": "ok", "note": "from-azure"}


def _as_azure_fills(command: str, values: dict[str, str]) -> str:
    """The command with its ``$[[ ]]`` blocks kept (brackets dropped) where every input in them
    is given, else removed, and each ``${{inputs.X}}`` / ``${{outputs.X}}`` replaced by its text."""
    def block(match: re.Match[str]) -> str:
        names = re.findall(r"\$\{\{(\w+\.\w+)\}\}", match.group(1))
        return match.group(1) if all(n in values for n in names) else ""

    line = re.sub(r"\$\[\[(.*?)\]\]", block, command, flags=re.S)
    return re.sub(r"\$\{\{(\w+\.\w+)\}\}", lambda m: values[m.group(1)], line)


@pytest.mark.slow
def test_compiles_a_component_azure_validates_and_its_processes_run_the_function(project: Path,
                                                                                  tmp_path: Path) -> None:
    az, out = tmp_path / "az", tmp_path / "out"
    proc = distcomp(tmp_path, "compile", "proj/train.py:train", "--target", "azureml", "--nodes", "2",
                    "--image", IMAGE, "--out", "az/component.yml")
    assert proc.returncode == 0, explain(proc)
    assert "Traceback" not in proc.stderr
    component = azure_load(az / "component.yml")  # azure-ai-ml's own loader and validator
    assert component.resources.instance_count == 2
    assert (component.distribution.type, component.distribution.process_count_per_instance) == ("pytorch", 2)
    assert {n: i.type for n, i in component.inputs.items()} == {
        "epochs": "integer", "lr": "number", "amp": "boolean", "mode": "string", "note": "string",
        "data": "uri_folder"}
    assert component.inputs["data"].optional and component.inputs["epochs"].default == 3
    doc = yaml.safe_load((az / "component.yml").read_text(encoding="utf-8"))
    code = (az / doc["code"]).resolve()
    assert code == project.resolve()  # the function's project is what Azure ML uploads
    assert doc["environment"] == {"image": IMAGE} and doc["environment_variables"] == {"MLFLOW_DISABLE_TELEMETRY": "true", "FN_PROBE": "yes"}

    script = f"""
import sys
sys.path.insert(0, {str(project)!r})
import distcomp
from train import train

sys.stdout.write(distcomp.compile(train, "azureml", nodes=2, image={IMAGE!r}).text)
"""
    python = subprocess.run([sys.executable, "-c", script], cwd=az, capture_output=True, text=True,
                            env=clean_env(), timeout=WAIT)
    assert python.returncode == 0, explain(python)
    mark, _, written = (az / "component.yml").read_text(encoding="utf-8").partition("\n")
    assert mark.startswith("# Written by distcomp")  # what --out may write again without --force
    assert python.stdout == written  # one component from both

    out.mkdir()  # Azure ML mounts the output's folder
    line = _as_azure_fills(doc["command"], {**{f"inputs.{k}": v for k, v in GIVEN.items()}, "outputs.out": str(out)})
    assert "--data" not in line and "${{" not in line
    env = {k: v for k, v in clean_env().items() if not k.startswith(("DISTCOMP", "MLFLOW", "PYTHONPATH"))}
    env.update(doc["environment_variables"], PATH=os.pathsep.join([str(Path(sys.executable).parent), env["PATH"]]))
    port = free_ports(1)[0]
    procs = [subprocess.Popen(["/bin/bash", "-c", line], cwd=code, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              env={**env, "NODE_RANK": str(rank // 2), "RANK": str(rank), "LOCAL_RANK": str(rank % 2),
                                   "WORLD_SIZE": "4", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)})
             for rank in range(4)]
    logs = [p.communicate(timeout=WAIT)[0].decode() for p in procs]
    assert [p.returncode for p in procs] == [0] * 4, logs
    got = rank_records(out)
    assert sorted(got) == [0, 1, 2, 3], logs
    for record in got.values():
        assert record["epochs"] == [2, "int"] and record["lr"] == [0.25, "float"] and record["amp"] == [True, "bool"]
        assert record["mode"] == ["ok", "str"] and record["note"] == ["from-azure", "str"]
        assert record["data"] == [None, "NoneType"] and record["out_type"] == "Output"
        assert record["world"] == 4 and record["env"] == "yes" and record["cwd"] == str(code)
