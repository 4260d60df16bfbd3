"""The local target: a Topology as real processes on this machine.

>>> result = run_topology(spec, topology, values, outputs, RunOptions(Path("runs/x")))  # doctest: +SKIP
>>> result.exit_code                                                                     # doctest: +SKIP
0

Its names load on first use: ``distcomp run`` imports what it runs a job with, not the reaper.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...base.lazy import exports

if TYPE_CHECKING:
    from ._claim import Claim, RunDirBusy, claim
    from ._job import LocalRun, run_local
    from ._prepare import Launch, prepare
    from ._reap import Reaped, reap
    from ._records import Failure, FoundOutput, ProcessResult, RunOptions, RunResult, describe_exit
    from ._runner import LaunchError, run_topology

_MODULES = {  # module: the names it provides
    "_claim": ("Claim", "RunDirBusy", "claim"),
    "_job": ("LocalRun", "run_local"),  # what distcomp.run starts a local job with
    "_prepare": ("Launch", "prepare"),
    "_reap": ("Reaped", "reap"),
    "_records": ("Failure", "FoundOutput", "ProcessResult", "RunOptions", "RunResult", "describe_exit"),
    "_runner": ("LaunchError", "run_topology"),
}
__getattr__, __dir__ = exports(__name__, _MODULES, globals())

__all__ = ["Claim", "Failure", "FoundOutput", "Launch", "LaunchError", "LocalRun", "ProcessResult", "Reaped", "RunDirBusy",
           "RunOptions", "RunResult", "claim", "describe_exit", "prepare", "reap", "run_local", "run_topology"]

