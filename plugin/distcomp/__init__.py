"""distcomp: one DistributedComponent spec, run the same way locally, on Kubeflow, Azure ML and MLflow.

The Python API (``distcomp.load``, ``run``, ``resume``, ``compile``, ``dryrun``, ``submit``, ``job``, ``validate``,
``render``, ``schema``, ``reap``, ``build_context``, ``nodes_range``, ``target_nodes`` and the
``distcomp.registry`` actions; ``component``, ``Input``, ``Output`` and ``export`` for
Python-function components, see ``distcomp.function``) is loaded on first use, so that ``import distcomp`` (and the
``distcomp`` command) stays fast. So is each public submodule: ``import distcomp`` then
``distcomp.runtime.log_metrics(...)`` works, as ``import distcomp.runtime`` would.
"""

from __future__ import annotations

from .base import launchernames as _launchernames
from .base import methodcache as _methodcache
from .base.lazy import exports

TYPE_CHECKING = False  # typing costs every process that imports this (an mpirun shim's too) ~10 ms; mypy reads True
if TYPE_CHECKING:
    from typing import Mapping

_methodcache.install()  # before the first record: its generated methods come compiled (base/methodcache.py)

__version__ = "0.1.0"
__all__ = ["FunctionComponent", "Input", "JobHandle", "JobOutcome", "JobState", "NodeRange", "Output", "ReapReport",
           "Rendered", "SpecCheck", "TargetNodes", "ValidationReport", "__version__", "build_context", "compile",
           "component", "dryrun", "export", "job", "load", "nodes_range", "reap", "registry", "render", "resume", "run",
           "schema", "submit", "target_nodes", "validate"]

_MODULES = {  # module: the names it provides
    "api": ("JobHandle", "compile", "dryrun", "job", "load", "resume", "run", "submit"),
    "records": ("JobOutcome", "JobState"),
    "api._specs": ("SpecCheck", "ValidationReport", "Rendered", "validate", "render", "schema"),
    "api._reap": ("ReapReport", "reap"),
    "api._image": ("build_context",),
    "function._component": ("component", "FunctionComponent"),
    "function._ports": ("Input", "Output"),
    "function._export": ("export",),
    "core.nodes": ("NodeRange", "TargetNodes", "nodes_range", "target_nodes"),
}
# Every public submodule is an attribute too, as after `import distcomp.runtime`: a function
# component or script that only did `import distcomp` calls distcomp.runtime.log_metrics(...).
# tests/test_package_attributes.py holds this list to the package's folder.
_SUBMODULES = ("agent", "api", "azureml", "base", "cli", "core", "delivery", "errors", "function", "hookspec", "kfp",
               "launchers", "mlstore", "records", "registry", "runtime", "spec", "target", "targets", "tracking",
               "worker")
__getattr__, __dir__ = exports(__name__, _MODULES, globals(), _SUBMODULES)


def _installed_launchers() -> Mapping[str, str]:
    import sys

    if "distcomp.core.plugins" not in sys.modules:  # no manager yet, so no plugin registered by hand
        from .core import _epcache

        if not _epcache.entry_points(_launchernames.GROUP):  # and none installed: the built-ins, none loaded
            return _launchernames.builtin_table()
    from .core.plugins import get_plugin_manager  # on use: `import distcomp` loads no plugin

    return get_plugin_manager().alias_table()


# the spec layer lists launcher names through these, without importing the plugin manager above it
_launchernames.provide(installed=_installed_launchers, builtin=_launchernames.builtin_table)
