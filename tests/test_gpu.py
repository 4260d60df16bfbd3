"""On a GPU machine (issue 37): a one-rank NCCL torch job with system metrics on. The rank's
LOCAL_RANK binds it to cuda:0, and the job's one MLflow run holds this node's GPU series
(``system/<host>/gpu_0_utilization_percentage``), sampled by distcomp's per-node monitor while
the rank keeps the GPU busy. Skips, saying why, where there is no GPU, no CUDA torch or no
nvidia-ml-py (MLflow's GPU monitor reads NVML through it)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from distcomp.tracking.nodes import host_node_id

from .targets._jobs import clean_env

RANK = '''\
import json, os, sys, time
import torch
import torch.distributed as dist

local = int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(local)  # LOCAL_RANK -> cuda:LOCAL_RANK, as every torchrun script does
dist.init_process_group("nccl")
x = torch.randn(4096, 4096, device="cuda")
end = time.monotonic() + float(sys.argv[2])
while time.monotonic() < end:  # busy: the node's GPU utilization shows it
    x = torch.nn.functional.normalize(x @ x)
    torch.cuda.synchronize()
total = torch.ones(1, device="cuda")
dist.all_reduce(total)
with open(sys.argv[1], "w") as f:
    json.dump({"local_rank": local, "device": str(x.device), "current": torch.cuda.current_device(),
               "all_reduce": total.item(), "backend": dist.get_backend()}, f)
dist.destroy_process_group()
'''
SPEC = """\
name: gpu-sysmetrics
type: DistributedComponent
inputs:
  busy: {type: Float, default: 10}
  out: {type: String}
launcher:
  type: torch.distributed
  process_count_per_node: 1
  additional_arguments: python rank.py {inputs.out} {inputs.busy}
"""


def _why_not() -> str | None:
    """Why this machine cannot run the test, or None."""
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    if not torch.cuda.is_available():
        return f"no GPU: torch.cuda.is_available() is False (torch {torch.__version__})"
    try:
        import pynvml  # noqa: F401  (nvidia-ml-py: MLflow's GPU monitor needs it)
    except ImportError:
        return "no nvidia-ml-py (import pynvml failed): MLflow logs no GPU metrics without it"
    return None


@pytest.mark.gpu
@pytest.mark.slow
def test_a_one_rank_nccl_job_binds_cuda_0_and_logs_this_node_s_gpu(tmp_path: Path) -> None:
    why = _why_not()
    if why:
        pytest.skip(why)
    code = tmp_path / "code"
    code.mkdir()
    (code / "rank.py").write_text(RANK)
    (code / "component.yaml").write_text(SPEC)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    out = tmp_path / "rank0.json"
    proc = subprocess.run([sys.executable, "-m", "distcomp", "run", str(code / "component.yaml"), "--quiet",
                           "--run-dir", str(tmp_path / "run"), "--input", f"out={out}", "--nodes", "1",
                           "--nproc-per-node", "1", "--system-metrics-interval", "1"],
                          cwd=tmp_path, env=clean_env(MLFLOW_TRACKING_URI=uri), capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    rank = json.loads(out.read_text())
    assert (rank["local_rank"], rank["device"], rank["current"]) == (0, "cuda:0", 0), rank
    assert rank["backend"] == "nccl" and rank["all_reduce"] == 1.0, rank
    from mlflow import MlflowClient

    client = MlflowClient(uri)
    (run,) = client.search_runs([e.experiment_id for e in client.search_experiments()])
    key = f"system/{host_node_id()}/gpu_0_utilization_percentage"
    history = client.get_metric_history(run.info.run_id, key)
    assert history, (key, sorted(run.data.metrics))
    assert max(m.value for m in history) > 0, [m.value for m in history]  # the busy rank shows
    assert f"system/{host_node_id()}/gpu_0_memory_usage_megabytes" in run.data.metrics
