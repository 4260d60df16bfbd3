"""TF_CONFIG carries ``"environment": "cloud"`` on every rank, as Azure ML's and Kubeflow's TFJob
operator's do (older Estimator code reads it; issue 34). A plain-Python rank under
tensorflow.distributed, a real local job with a worker and a parameter server."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ..targets._jobs import clean_env

SPEC = """\
$schema: https://azuremlschemas.azureedge.net/latest/commandJob.schema.json
type: command
name: tf-config-environment
outputs:
  out: {type: uri_folder}
code: .
command: python rank.py ${{outputs.out}}
distribution: {type: tensorflow, worker_count: 2, parameter_server_count: 1}
"""

RANK = """\
import json, os, sys, time
config = json.loads(os.environ["TF_CONFIG"])
task = config["task"]
part = os.path.join(sys.argv[1], f"{task['type']}-{task['index']}.part")
with open(part, "w") as f:
    json.dump(config, f)
os.replace(part, part[:-5] + ".json")  # whole, or not there
if task["type"] == "ps":
    time.sleep(300)  # a parameter server serves until the job stops it
# the job stops the parameter server when the workers end: they wait for its file (under load it
# may start last), so the test reads every task's
deadline = time.monotonic() + 120
while not os.path.exists(os.path.join(sys.argv[1], "ps-0.json")) and time.monotonic() < deadline:
    time.sleep(0.1)
"""


@pytest.mark.slow
def test_every_task_sees_environment_cloud(tmp_path: Path) -> None:
    code = tmp_path / "code"
    code.mkdir()
    (code / "job.yml").write_text(SPEC, encoding="utf-8")
    (code / "rank.py").write_text(RANK, encoding="utf-8")
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "distcomp", "run", str(code / "job.yml"), "--no-tracking",
                           "--run-dir", str(tmp_path / "run"), "--output", f"out={out}"],
                          capture_output=True, text=True, timeout=180, env=clean_env(), cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    configs = {p.stem: json.loads(p.read_text(encoding="utf-8")) for p in out.glob("*.json")}
    assert sorted(configs) == ["ps-0", "worker-0", "worker-1"]
    assert {name: c["environment"] for name, c in configs.items()} == dict.fromkeys(configs, "cloud")
    assert all(set(c) == {"cluster", "task", "environment"} for c in configs.values())
