"""The kubeflow target's CLI flags, for callers that pass them on (the KFP multi-node step)."""

from __future__ import annotations


def kubeflow_flags() -> frozenset[str]:
    """Every flag ``distcomp submit --target kubeflow`` takes (``--no-X`` for a bool's off)."""
    from .._builtin import KUBEFLOW

    flags: set[str] = set()
    for option in KUBEFLOW.options:
        flag = option.cli_flag
        flags.add(flag)
        if option.short:
            flags.add(option.short)
        if option.kind == "bool":
            flags.add("--no-" + flag[2:])
    return frozenset(flags)
