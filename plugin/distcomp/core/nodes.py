"""A job's node count as the user writes it: ``N``, or an elastic range ``MIN:MAX`` (TorchX's
spelling), and what a range means for a target (``distcomp compile|submit --nodes``).

>>> import distcomp
>>> distcomp.nodes_range("2:4")
NodeRange(min=2, max=4, elastic=True)
>>> distcomp.target_nodes("kubeflow", "2:4", {"image": "i:1"}).options["elastic"]  # doctest: +SKIP
'2:4'
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Mapping, Union

from ..errors import UsageError

__all__ = ["NodeRange", "TargetNodes", "nodes_range", "target_nodes"]


@dataclass(frozen=True)
class NodeRange:
    """``N`` (``elastic`` False, ``min == max``) or ``MIN:MAX`` (an elastic job laid out for MAX)."""

    min: int
    max: int
    elastic: bool = True

    def __str__(self) -> str:
        return f"{self.min}:{self.max}" if self.elastic else str(self.max)


@dataclass(frozen=True)
class TargetNodes:
    """What a target gets for a node count: ``nodes`` to pass, and the target's options with an
    elastic range folded in as its ``elastic`` option."""

    nodes: int | None
    options: Mapping[str, Any]


Nodes = Union[int, str, NodeRange, None]


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise UsageError(f"expected an integer >= 1, got {text!r}")
    return value


def nodes_range(text: str | int) -> NodeRange:
    """``"4"`` or ``4`` -> ``NodeRange(4, 4, elastic=False)``; ``"2:4"`` -> ``NodeRange(2, 4)``.
    Anything else (``0``, ``4:2``, ``x``) raises a UsageError."""
    if isinstance(text, int) and not isinstance(text, bool):
        text = str(text)
    if not isinstance(text, str):
        raise UsageError(f"expected a node count N or MIN:MAX, got {text!r}")
    low, colon, high = text.partition(":")
    if not colon:
        count = _count(text)
        return NodeRange(count, count, elastic=False)
    first, last = _count(low), _count(high)
    if first > last:
        raise UsageError(f"{text!r}: MIN:MAX with MIN <= MAX")
    return NodeRange(first, last)


def _elastic(options: Any) -> bool:
    return any(o.name == "elastic" for o in options)


def target_nodes(target: str, nodes: Nodes, options: Mapping[str, Any] | None = None) -> TargetNodes:
    """The node count and options to compile or submit with on ``target``: a plain count as it
    is; an elastic range becomes the target's ``elastic`` option, the job laid out for MAX nodes,
    where the target has one (a range given twice, or to a target without it: a UsageError)."""
    options = dict(options or {})
    if nodes is None:
        return TargetNodes(None, MappingProxyType(options))
    found = nodes if isinstance(nodes, NodeRange) else nodes_range(nodes)
    if not found.elastic:
        return TargetNodes(found.max, MappingProxyType(options))
    from .plugins import get_plugin_manager  # its PluginError (a conflict, an unknown target) is a UsageError

    kind = get_plugin_manager().target(target).type
    types = {name: t.type for name, t in get_plugin_manager().targets().items()}
    if not _elastic(kind.options):
        elastic = [n for n, t in types.items() if _elastic(t.options)]
        raise UsageError(f"--nodes {found}: --target {kind.name} runs a fixed number of nodes; an elastic range is "
                         f"for --target {' or '.join(elastic) or '(none installed)'}")
    if options.get("elastic"):
        raise UsageError("give the elastic range once: --nodes MIN:MAX or --elastic MIN:MAX")
    options["elastic"] = str(found)
    return TargetNodes(found.max, MappingProxyType(options))
