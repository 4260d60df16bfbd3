"""The local target: a Topology as real processes on this machine.

>>> result = run_topology(spec, topology, values, outputs, RunOptions(Path("runs/x")))  # doctest: +SKIP
>>> result.exit_code                                                                     # doctest: +SKIP
0
"""

from ._claim import Claim, RunDirBusy, claim
from ._prepare import Launch, prepare
from ._reap import Reaped, reap
from ._records import Failure, FoundOutput, ProcessResult, RunOptions, RunResult, describe_exit
from ._runner import LaunchError, run_topology

__all__ = ["Claim", "Failure", "FoundOutput", "Launch", "LaunchError", "ProcessResult", "Reaped", "RunDirBusy",
           "RunOptions", "RunResult", "claim", "describe_exit", "prepare", "reap", "run_topology"]
