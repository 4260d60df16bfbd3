"""distcomp: one DistributedComponent spec, run the same way locally, on Kubeflow, Azure ML and MLflow.

The Python API (``distcomp.load``, ``run``, ``compile``, ``dryrun``, ``submit``, ``job``, ``validate``,
``render``, ``schema``, ``reap``, ``build_context``, ``nodes_range``, ``target_nodes`` and the
``distcomp.registry`` actions; ``component``, ``Input``, ``Output`` and ``export`` for
Python-function components, see ``distcomp.function``) is loaded on first use, so that ``import distcomp`` (and the
``distcomp`` command) stays fast. So is each public submodule: ``import distcomp`` then
``distcomp.runtime.log_metrics(...)`` works, as ``import distcomp.runtime`` would.
"""

from __future__ import annotations

from typing import Mapping

from . import _launchernames
from ._lazy import exports

__version__ = "0.1.0"
__all__ = ["FunctionComponent", "Input", "JobHandle", "JobOutcome", "JobState", "NodeRange", "Output", "ReapReport",
           "Rendered", "SpecCheck", "TargetNodes", "ValidationReport", "__version__", "build_context", "compile",
           "component", "dryrun", "export", "job", "load", "nodes_range", "reap", "registry", "render", "run", "schema",
           "submit", "target_nodes", "validate"]

_MODULES = {  # module: the names it provides
    "api": ("JobHandle", "compile", "dryrun", "job", "load", "run", "submit"),
    "outcome": ("JobOutcome", "JobState"),
    "_specs_api": ("SpecCheck", "ValidationReport", "Rendered", "validate", "render", "schema"),
    "_reap_api": ("ReapReport", "reap"),
    "_image_api": ("build_context",),
    "function._component": ("component", "FunctionComponent"),
    "function._ports": ("Input", "Output"),
    "function._export": ("export",),
    "_nodes": ("NodeRange", "TargetNodes", "nodes_range", "target_nodes"),
}
# Every public submodule is an attribute too, as after `import distcomp.runtime`: a function
# component or script that only did `import distcomp` calls distcomp.runtime.log_metrics(...).
# tests/test_package_attributes.py holds this list to the package's folder.
_SUBMODULES = ("agent", "agentboot", "agentjob", "api", "azureml", "cli", "delivery", "errors", "function", "hookspec",
               "instances", "jobrecord", "jobs", "kfp", "kinds", "launchers", "mlstore", "outcome", "plan", "plugins",
               "records", "redact", "registry", "results", "runtime", "spec", "target", "targets", "tracking",
               "worker")
__getattr__, __dir__ = exports(__name__, _MODULES, globals(), _SUBMODULES)


def _installed_launchers() -> Mapping[str, str]:
    from .plugins import get_plugin_manager  # on use: `import distcomp` loads no plugin

    return get_plugin_manager().alias_table()


def _builtin_launchers() -> Mapping[str, str]:
    from .plugins import PluginManager

    manager = PluginManager()
    manager.load_builtins()
    return manager.alias_table()


# the spec layer lists launcher names through these, without importing the plugin manager above it
_launchernames.provide(installed=_installed_launchers, builtin=_builtin_launchers)
