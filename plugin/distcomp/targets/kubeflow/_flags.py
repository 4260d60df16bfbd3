"""The kubeflow target's CLI flags, for callers that pass them on (the KFP multi-node step)."""

from __future__ import annotations


def kubeflow_flags() -> frozenset[str]:
    """Every flag ``distcomp submit --target kubeflow`` takes (``--no-X`` for a bool's off), from
    the target's record as registered (not from ``targets._builtin``, which imports this package)."""
    from ...plugins import get_plugin_manager

    flags: set[str] = set()
    for option in get_plugin_manager().target("kubeflow").type.options:
        flag = option.cli_flag
        flags.add(flag)
        if option.short:
            flags.add(option.short)
        if option.kind == "bool":
            flags.add("--no-" + flag[2:])
    return frozenset(flags)
