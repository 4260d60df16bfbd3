"""The local target: a Topology as real processes on this machine.

>>> result = run_topology(spec, topology, values, outputs, RunOptions(Path("runs/x")))  # doctest: +SKIP
>>> result.exit_code                                                                     # doctest: +SKIP
0
"""

from ._prepare import Launch, prepare
from ._records import Failure, ProcessResult, RunOptions, RunResult, describe_exit
from ._runner import LaunchError, run_topology

__all__ = ["Failure", "Launch", "LaunchError", "ProcessResult", "RunOptions", "RunResult", "describe_exit",
           "prepare", "run_topology"]
