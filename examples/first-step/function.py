"""The same step as component.yaml and step.py, written as a typed Python function."""

import os

import distcomp
from distcomp import runtime


@distcomp.component(name="first-step-function", version="1.0.0", launcher="torch.distributed", nproc_per_node=2)
def step(result: distcomp.Output, greeting: str = "hello", repeat: int = 1) -> None:
    """Every rank writes a greeting into the output folder; rank 0 logs how many it wrote."""
    me = runtime.rank_info()
    with open(os.path.join(result, f"rank-{me.rank}.txt"), "w") as f:
        f.write(f"{greeting} from rank {me.rank} of {me.world_size}\n" * repeat)
    runtime.log_metric("lines", repeat, step=0)
