"""distcomp's MLflow hook for a tracked job's ranks (see ``distcomp.runtime._mlflow_hook``).

This folder is put first on a rank's PYTHONPATH when the job has an MLflow run, so Python
imports this module at start-up (``site``). It holds nothing else: no other module of the
rank's (nor the standard library's) is shadowed. It only adds an import watcher: the patches
are loaded when the script imports mlflow's tracking modules (or Lightning's MLflow logger),
so a rank that never imports them pays a dictionary lookup per import. In a job watched for
hangs (``DISTCOMP_STACKS_DIR``) it also registers the rank's stack dump (``_stacks``). Then it
runs the ``sitecustomize`` this one hides, if the environment has one.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # typing itself costs a rank milliseconds at every start; mypy reads this name as True
if TYPE_CHECKING:
    import importlib.abc
    import importlib.machinery
    import types

_HERE = os.path.dirname(os.path.abspath(__file__))
_WATCHED = frozenset({"mlflow.tracking.client", "mlflow.tracking.fluent", "mlflow.utils.autologging_utils",
                      "lightning.pytorch.loggers.mlflow", "pytorch_lightning.loggers.mlflow"})  # _mlflow_hook.MODULES


def _patch(module: types.ModuleType) -> None:
    try:
        from distcomp.runtime import _mlflow_hook
    except ImportError:  # another interpreter than distcomp's: try distcomp's own folder, last on the path
        sys.path.append(os.path.dirname(os.path.dirname(os.path.dirname(_HERE))))
        try:
            from distcomp.runtime import _mlflow_hook
        except Exception as exc:
            print(f"distcomp: MLflow runs are not redirected to the job's run in this process: cannot import "
                  f"distcomp ({type(exc).__name__}: {exc})", file=sys.stderr)
            return
    _mlflow_hook.patch(module)


class _Loader:
    """The real loader, then the patch."""

    def __init__(self, loader: importlib.abc.Loader) -> None:
        self._loader = loader

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None:
        return self._loader.create_module(spec)

    def exec_module(self, module: types.ModuleType) -> None:
        self._loader.exec_module(module)
        _patch(module)

    def __getattr__(self, name: str) -> object:  # get_source, get_resource_reader, ...: the real loader's
        return getattr(self._loader, name)


class _Watcher:
    """A meta-path finder that finds nothing itself: it wraps the loader of a watched module."""

    def find_spec(self, name: str, path: object = None,
                  target: object = None) -> importlib.machinery.ModuleSpec | None:
        if name not in _WATCHED:
            return None
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            if finder is self or find is None:
                continue
            spec = find(name, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _Loader(spec.loader)
                return spec
        return None


def _chain() -> None:
    """Run the sitecustomize this module hides (a distribution's, a virtualenv's)."""
    # the path finder Python already has (importing importlib.machinery for it costs more than this module)
    finder = next((f for f in sys.meta_path if getattr(f, "__name__", "") == "PathFinder"), None)
    rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]
    spec = finder.find_spec("sitecustomize", rest) if finder is not None else None
    if spec is None or spec.loader is None:
        return
    import importlib.util  # milliseconds: only when there is one to run

    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)


def _stacks(*places: str) -> None:
    """A job watched for hangs: the rank's stack dump (``distcomp.agent.stackdump``, loaded by its
    path from the first of ``places`` that holds it)."""
    if not os.environ.get("DISTCOMP_STACKS_DIR"):
        return
    import importlib.util

    for place in places:
        path = os.path.join(_HERE, place, "stackdump.py")
        spec = importlib.util.spec_from_file_location("_distcomp_stackdump", path) if os.path.isfile(path) else None
        if spec is not None and spec.loader is not None:
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            module.register()
            return


_stacks(os.path.join("..", "..", "agent"), "..")
if os.environ.get("DISTCOMP_MLFLOW_RUN_ID") and os.environ.get("DISTCOMP_TRACKING") != "off":
    sys.meta_path.insert(0, _Watcher())
_chain()
