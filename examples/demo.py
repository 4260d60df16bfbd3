"""`make demo`: check every example and peer spec, then the main job: train the PyTorch DDP
example on 2 real local ranks with `distcomp run` and show its loss falling."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

from distcomp.spec import bind_inputs, check_file

ROOT = Path(__file__).resolve().parents[1]


def show(path: Path) -> bool:
    result = check_file(path)
    rel = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
    for diag in result.diagnostics:
        print(f"  {diag}")
    spec = result.spec
    if spec is None:
        print(f"FAIL {rel}")
        return False
    d = spec.distribution
    print(f"ok   {rel}: {spec.ref} [{result.dialect}]")
    print(f"     launcher {d.launcher}: {d.nodes} node(s) x {d.processes_per_node or 1} process(es)")
    for name, inp in spec.inputs.items():
        extra = f" = {inp.default!r}" if inp.default is not None else (" (optional)" if inp.optional else " (required)")
        print(f"     input  {name}: {inp.type}{extra}")
    for name, out in spec.outputs.items():
        print(f"     output {name}: {out.type}")
    given = {n: "/data/" + n for n, i in spec.inputs.items() if i.default is None and not i.optional}
    argv = spec.render(bind_inputs(spec, given), {n: f"/runs/demo/outputs/{n}" for n in spec.outputs})
    print(f"     argv   {shlex.join(argv)}")
    return True


def train() -> bool:
    """The main job, exactly as a user runs it: `distcomp run` on 2 ranks, tracked by MLflow."""
    spec = ROOT / "examples" / "pytorch-ddp" / "component.yaml"
    with tempfile.TemporaryDirectory(prefix="distcomp-demo-") as tmp:
        uri = f"sqlite:///{tmp}/mlflow.db"
        run_dir = Path(tmp) / "run"
        argv = [sys.executable, "-m", "distcomp", "run", str(spec), "--run-dir", str(run_dir), "--timeout", "300"]
        print(f"\n$ MLFLOW_TRACKING_URI={uri} distcomp run {spec.relative_to(ROOT)} --run-dir {run_dir}", flush=True)
        if subprocess.run(argv, env={**os.environ, "MLFLOW_TRACKING_URI": uri}).returncode != 0:
            print("FAIL the training job failed")
            return False
        metrics = json.loads((run_dir / "outputs" / "model" / "metrics.json").read_text())
        tracked = mlflow_loss(uri, "pytorch-ddp-example")  # the component name
    loss = metrics["loss"]
    print(f"loss by epoch on {metrics['world_size']} ranks: " + " -> ".join(f"{x:.4f}" for x in loss))
    falling = loss[-1] < loss[0]
    print("ok   loss fell" if falling else "FAIL loss did not fall")
    same = [round(x, 6) for x in tracked] == [round(x, 6) for x in loss]
    print(f"ok   one MLflow run holds rank 0's {len(tracked)} loss points" if same
          else f"FAIL MLflow has {tracked}, the job reported {loss}")
    return falling and same


def mlflow_loss(uri: str, experiment: str) -> list[float]:
    """The loss history of the job's one MLflow run."""
    from mlflow import MlflowClient

    client = MlflowClient(uri)
    exp = client.get_experiment_by_name(experiment)
    runs = client.search_runs([exp.experiment_id]) if exp else []
    if len(runs) != 1:
        return []
    return [m.value for m in sorted(client.get_metric_history(runs[0].info.run_id, "loss"), key=lambda m: m.step)]


def main() -> int:
    specs = sorted(ROOT.glob("examples/*/component.yaml")) + sorted(ROOT.glob("components/*/component.yaml"))
    peer = ROOT.parent / "shared" / "peer-specs"
    specs += sorted(peer.glob("*.y*ml")) if peer.is_dir() else []
    results = [show(p) for p in specs]
    print(f"\n{sum(results)}/{len(results)} specs valid")
    return 0 if all(results) and train() else 1


if __name__ == "__main__":
    sys.exit(main())
