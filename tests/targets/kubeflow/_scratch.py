"""For tests of other Kubeflow features: every output is declared scratch (``--scratch``), as
an output on the pod's own disk is otherwise a compile error (tested in test_code_delivery)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from distcomp.spec import load


def scratch(spec: str | Path, options: dict[str, Any]) -> dict[str, Any]:
    """``options`` with ``scratch`` naming every output, unless they say where outputs go."""
    if any(options.get(k) for k in ("volumes", "store", "scratch", "output_paths")):
        return options
    return {**options, "scratch": list(load(str(spec)).outputs)}


def scratch_flags(spec: str | Path) -> list[str]:
    """The CLI's ``--scratch NAME`` for every output of ``spec``."""
    return [w for name in load(str(spec)).outputs for w in ("--scratch", name)]


def job_doc(text: str) -> Any:
    """The job manifest in what ``distcomp compile --target kubeflow`` printed: the last
    document (a ConfigMap holding the code may come first)."""
    import yaml

    return list(yaml.safe_load_all(text))[-1]
