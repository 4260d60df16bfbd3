"""distcomp: one DistributedComponent spec, run the same way locally, on Kubeflow, Azure ML and MLflow.

The Python API (``distcomp.load``, ``run``, ``compile``, ``dryrun``, ``submit``, ``job``, ``validate``,
``render``, ``schema``, ``reap``, ``build_context``, ``nodes_range``, ``target_nodes`` and the
``distcomp.registry`` actions; ``component``, ``Input``, ``Output`` and ``export`` for
Python-function components, see ``distcomp.function``) is loaded on first use, so that ``import distcomp`` (and the
``distcomp`` command) stays fast.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"
__all__ = ["FunctionComponent", "Input", "JobHandle", "JobOutcome", "JobState", "NodeRange", "Output", "ReapReport",
           "Rendered", "SpecCheck", "TargetNodes", "ValidationReport", "__version__", "build_context", "compile",
           "component", "dryrun", "export", "job", "load", "nodes_range", "reap", "registry", "render", "run", "schema",
           "submit", "target_nodes", "validate"]

_API = {"JobHandle": "api", "compile": "api", "dryrun": "api", "job": "api", "load": "api", "run": "api", "submit": "api",
        "JobOutcome": "outcome", "JobState": "outcome",
        "SpecCheck": "_specs_api", "ValidationReport": "_specs_api", "Rendered": "_specs_api",
        "validate": "_specs_api", "render": "_specs_api", "schema": "_specs_api",
        "ReapReport": "_reap_api", "reap": "_reap_api", "build_context": "_image_api",
        "component": "function._component", "FunctionComponent": "function._component",
        "Input": "function._ports", "Output": "function._ports", "export": "function._export",
        "NodeRange": "_nodes", "TargetNodes": "_nodes", "nodes_range": "_nodes", "target_nodes": "_nodes"}
_PACKAGES = ("registry",)  # distcomp.registry.publish(...) after a bare `import distcomp`


def __getattr__(name: str) -> Any:
    if name in _API or name in _PACKAGES:
        import importlib

        module = importlib.import_module(f"{__name__}.{_API.get(name, name)}")
        return module if name in _PACKAGES else getattr(module, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
