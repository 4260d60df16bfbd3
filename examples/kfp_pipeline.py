"""A KFP v2 pipeline with a distributed step: prepare data, then train the PyTorch DDP example
on 2 ranks (examples/pytorch-ddp, made a KFP component by distcomp.kfp.load_component).

    python examples/kfp_pipeline.py                       # compile to kfp_pipeline.yaml
    python examples/kfp_pipeline.py --image REGISTRY/distcomp-torch:0.1.0 \\
        --tracking-uri http://mlflow.kubeflow:5000 --out ddp.yaml    # for a cluster
    MLFLOW_TRACKING_URI=sqlite:////tmp/mlflow.db python examples/kfp_pipeline.py --run-local

On a cluster the training image must hold distcomp and torch (the spec's python:3.11-slim
does not): build one (pip install 'distcomp[torch]') and pass --image, or list them with
--package. --run-local runs both steps here with kfp.local's SubprocessRunner, in this
Python environment.
"""

# No `from __future__ import annotations`: kfp reads the components' annotations as types.
import argparse
import json
import os
from pathlib import Path
from typing import Callable, Sequence

from kfp import compiler, dsl, local

from distcomp.kfp import load_component

SPEC = Path(__file__).resolve().parent / "pytorch-ddp" / "component.yaml"


@dsl.component(base_image="python:3.11")
def prepare_data(samples: int, seed: int, data: dsl.Output[dsl.Dataset]):
    """Writes train.csv: 16 features and y = sin(x . w) + noise (standard library only)."""
    import csv
    import math
    import os
    import random

    rng = random.Random(seed)
    w = [rng.gauss(0, 1) / 4 for _ in range(16)]
    os.makedirs(data.path, exist_ok=True)
    with open(os.path.join(data.path, "train.csv"), "w", newline="") as f:
        out = csv.writer(f)
        out.writerow([f"x{i}" for i in range(16)] + ["y"])
        for _ in range(samples):
            x = [rng.gauss(0, 1) for _ in range(16)]
            y = math.sin(sum(a * b for a, b in zip(x, w))) + 0.05 * rng.gauss(0, 1)
            out.writerow([f"{v:.5f}" for v in x] + [f"{y:.5f}"])
    data.metadata["samples"] = samples


def build_pipeline(image: str | None = None, packages: Sequence[str] = (),
                   tracking_uri: str | None = None) -> Callable[..., object]:
    train = load_component(SPEC, image=image, packages_to_install=packages)

    @dsl.pipeline(name="distcomp-ddp", description="Prepare data, then 2-rank DDP training with distcomp.")
    def pipeline(samples: int = 2048, epochs: int = 3, lr: float = 0.05, seed: int = 0) -> dsl.Artifact:
        prepared = prepare_data(samples=samples, seed=seed)
        trained = train(data=prepared.outputs["data"], epochs=epochs, lr=lr, seed=seed)
        if tracking_uri:  # otherwise the step passes on whatever MLFLOW_TRACKING_URI its environment has
            trained.set_env_variable("MLFLOW_TRACKING_URI", tracking_uri)
        return trained.outputs["model"]

    return pipeline


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default="kfp_pipeline.yaml", help="the compiled pipeline (default: %(default)s)")
    p.add_argument("--image", help="the training step's image (default: the spec's)")
    p.add_argument("--package", action="append", default=[], help="a pip package the training step installs")
    p.add_argument("--tracking-uri", help="MLFLOW_TRACKING_URI of the training step")
    p.add_argument("--run-local", action="store_true", help="also run it here with kfp.local (SubprocessRunner)")
    p.add_argument("--pipeline-root", default="local_outputs", help="kfp.local's output folder (default: %(default)s)")
    p.add_argument("--samples", type=int, default=2048)
    p.add_argument("--epochs", type=int, default=3)
    args = p.parse_args(argv)

    pipeline = build_pipeline(args.image, args.package, args.tracking_uri)
    compiler.Compiler().compile(pipeline, package_path=args.out)
    print(f"compiled the pipeline to {args.out}", flush=True)
    if not args.run_local:
        return 0
    if not (args.tracking_uri or os.environ.get("MLFLOW_TRACKING_URI")):
        print("MLFLOW_TRACKING_URI is not set: the training step runs without MLflow tracking", flush=True)
    root = Path(args.pipeline_root)
    local.init(runner=local.SubprocessRunner(use_venv=False), pipeline_root=str(root),
               workspace_root=str(root / "workspace"))
    model = pipeline(samples=args.samples, epochs=args.epochs).output
    metrics = json.loads((Path(model.path) / "metrics.json").read_text())
    print(f"model: {model.path}")
    print(f"loss by epoch on {metrics['world_size']} ranks: " + " -> ".join(f"{x:.4f}" for x in metrics["loss"]))
    print("step metadata: " + json.dumps(model.metadata, sort_keys=True), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
