"""A function project for the cluster targets (Slurm, Ray), written into a tmp folder as a user
writes one: ``train.py`` with the component, importing ``helpers.py`` beside it (which must
travel too). Each rank joins a gloo all-reduce across the nodes and writes, to its Output, what
it received (each value with its Python type) and the node it ran on; rank 0 logs a metric
through ``distcomp.runtime``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

# the project's files that travel (model.ckpt is .gitignore'd, notes.txt .distcompignore'd)
SHIPPED = [".distcompignore", ".gitignore", "helpers.py", "train.py"]
# a str value that a shell would split, unquote and run: it must reach the function exactly
NASTY = "it's \"quoted\" $(touch pwned) a  b; echo `x`"

TRAIN = '''\
"""Two nodes, one rank each: a gloo all-reduce, and what each rank received."""

import json
import os

import distcomp
from distcomp import runtime
from helpers import node_name  # a sibling module: it travels with the function


@distcomp.component(name="fn-nodes", version="1.0.0", launcher="torch.distributed", nodes=2, nproc_per_node=1)
def train(result: distcomp.Output, epochs: int = 2, lr: float = 0.5, amp: bool = False, note: str = "plain"):
    """Every rank writes what it received, with the types, and its node."""
    import torch
    import torch.distributed as dist

    info = runtime.rank_info()
    dist.init_process_group("gloo")
    total = torch.tensor([info.rank + 1.0])
    dist.all_reduce(total)
    dist.destroy_process_group()
    got = {name: [value, type(value).__name__]
           for name, value in dict(epochs=epochs, lr=lr, amp=amp, note=note).items()}
    got.update(rank=info.rank, world=info.world_size, node=node_name(), sum=total.item(),
               result_type=type(result).__name__, run_id=os.environ.get("MLFLOW_RUN_ID", ""),
               files=sorted(f for f in os.listdir(".") if f != "__pycache__"))  # what travelled
    os.makedirs(result, exist_ok=True)
    with open(os.path.join(result, f"rank{info.rank}.json"), "w") as f:
        json.dump(got, f)
    for step in range(epochs):
        runtime.log_metric("loss", lr / (step + 1), step=step)
    runtime.log_metric("all_reduce", total.item())
'''

HELPERS = '''\
import os


def node_name():
    """The cluster node this rank runs on, as each dev cluster names it."""
    return os.environ.get("SLURMD_NODENAME") or os.environ.get("DISTCOMP_RAY_NODE") or "?"
'''


def write_project(folder: Path) -> Path:
    """``folder/proj`` with ``train.py`` and ``helpers.py``; a .gitignore'd and a .distcompignore'd
    file that must stay home."""
    proj = folder / "proj"
    proj.mkdir(parents=True)
    files = {"train.py": TRAIN, "helpers.py": HELPERS, ".gitignore": "*.ckpt\n", ".distcompignore": "notes.txt\n",
             "model.ckpt": "big", "notes.txt": "local"}
    for name, text in files.items():
        (proj / name).write_text(text, encoding="utf-8")
    return proj


def ranks(out: Path, world: int = 2) -> list[dict[str, Any]]:
    """What each rank wrote, in rank order (and nothing else in the Output)."""
    from .conftest import ranks as by_rank

    return list(by_rank(out, world).values())


def check_typed(got: dict[str, Any], epochs: int, amp: bool, note: str) -> None:
    """The values arrived converted back to their Python types, the str exactly as given."""
    assert got["epochs"] == [epochs, "int"]
    assert got["lr"] == [0.5, "float"]
    assert got["amp"] == [amp, "bool"]
    assert got["note"] == [note, "str"]
    assert got["result_type"] == "Output" and got["world"] == 2 and got["sum"] == 3.0
    # the rank runs in the project: the sibling module came, what .gitignore and .distcompignore
    # leave out stayed home
    assert got["files"] == SHIPPED, got["files"]
