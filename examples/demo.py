"""`make demo`: check every example and peer spec, then the main job: train the PyTorch DDP
example on 2 real local ranks with `distcomp run` and show its loss falling."""

from __future__ import annotations

import json
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
    """The main job, exactly as a user runs it: `distcomp run` on 2 ranks."""
    spec = ROOT / "examples" / "pytorch-ddp" / "component.yaml"
    with tempfile.TemporaryDirectory(prefix="distcomp-demo-") as tmp:
        argv = [sys.executable, "-m", "distcomp", "run", str(spec), "--run-dir", tmp, "--timeout", "300"]
        print(f"\n$ distcomp run {spec.relative_to(ROOT)} --run-dir {tmp}", flush=True)
        if subprocess.run(argv).returncode != 0:
            print("FAIL the training job failed")
            return False
        metrics = json.loads((Path(tmp) / "outputs" / "model" / "metrics.json").read_text())
    loss = metrics["loss"]
    print(f"loss by epoch on {metrics['world_size']} ranks: " + " -> ".join(f"{x:.4f}" for x in loss))
    falling = loss[-1] < loss[0]
    print("ok   loss fell" if falling else "FAIL loss did not fall")
    return falling


def main() -> int:
    specs = sorted(ROOT.glob("examples/*/component.yaml")) + sorted(ROOT.glob("components/*/component.yaml"))
    peer = ROOT.parent / "shared" / "peer-specs"
    specs += sorted(peer.glob("*.y*ml")) if peer.is_dir() else []
    results = [show(p) for p in specs]
    print(f"\n{sum(results)}/{len(results)} specs valid")
    return 0 if all(results) and train() else 1


if __name__ == "__main__":
    sys.exit(main())
