"""distcomp: one DistributedComponent spec, run the same way locally, on Kubeflow, Azure ML and MLflow.

The Python API (``distcomp.load``, ``run``, ``compile``, ``dryrun``, ``submit``, ``job``) is loaded on first
use, so that ``import distcomp`` (and the ``distcomp`` command) stays fast.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"
__all__ = ["JobHandle", "JobOutcome", "JobState", "__version__", "compile", "dryrun", "job", "load", "run", "submit"]

_API = {"JobHandle": "api", "compile": "api", "dryrun": "api", "job": "api", "load": "api", "run": "api", "submit": "api",
        "JobOutcome": "outcome", "JobState": "outcome"}


def __getattr__(name: str) -> Any:
    if name in _API:
        import importlib

        return getattr(importlib.import_module(f"{__name__}.{_API[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
