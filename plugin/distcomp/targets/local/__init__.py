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
    from ._job import HERE, Here, LocalRun, check_local, job_id, request_of, run_here
    from ._prepare import Launch, prepare
    from ._reap import Reaped, reap
    from ._resume import Resume, kept_options, resumable
    from ._records import Failure, FoundOutput, ProcessResult, RunOptions, RunResult, describe_exit
    from ._runner import LaunchError, run_topology
    from ._target import LocalTarget

_MODULES = {  # module: the names it provides
    "_claim": ("Claim", "RunDirBusy", "claim"),
    # what a local job is run with, once the core made its run (distcomp.run, a background job's worker)
    "_job": ("HERE", "Here", "LocalRun", "check_local", "job_id", "request_of", "run_here"),
    "_prepare": ("Launch", "prepare"),
    "_reap": ("Reaped", "reap"),
    "_resume": ("Resume", "kept_options", "resumable"),
    "_records": ("Failure", "FoundOutput", "ProcessResult", "RunOptions", "RunResult", "describe_exit"),
    "_runner": ("LaunchError", "run_topology"),
    "_target": ("LocalTarget",),
}
__getattr__, __dir__ = exports(__name__, _MODULES, globals())

__all__ = ["HERE", "Claim", "Failure", "FoundOutput", "Here", "Launch", "LaunchError", "LocalRun", "LocalTarget",
           "ProcessResult", "Reaped", "Resume", "RunDirBusy", "RunOptions", "RunResult", "check_local", "claim",
           "describe_exit", "job_id", "kept_options", "prepare", "reap", "request_of", "resumable", "run_here",
           "run_topology"]

