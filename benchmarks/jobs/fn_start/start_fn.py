"""The same job as component.yaml + script.py, written as a function (benchmarks/launch.py's function row)."""
import time

import distcomp


@distcomp.component(name="bench-fn-start", version="0.1.0", nproc_per_node=2)
def start() -> None:
    """Two ranks that print the wall clock in ns the moment they run."""
    print(time.time_ns(), flush=True)
