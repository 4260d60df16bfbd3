"""What an API server's structural-schema pruning would drop from a custom object.

jsonschema lets unknown keys through; Kubernetes silently PRUNES every key its CRD's
structural schema does not declare (a misspelt or retired field, such as Trainer v2.0's
``podSpecOverrides``, vanishes with what it carried). ``pruned`` lists those keys, so a test
can refuse them the way the cluster would drop them."""

from __future__ import annotations

from typing import Any

# kept at the root of every object whatever its schema says (ObjectMeta is validated apart)
_ROOT = {"apiVersion", "kind", "metadata"}


def pruned(value: Any, schema: dict[str, Any], path: str = "", root: bool = True) -> list[str]:
    """The paths of every key of ``value`` that ``schema`` (an openAPIV3Schema) would prune."""
    if isinstance(value, list):
        items = schema.get("items") or {}
        return [p for i, v in enumerate(value) for p in pruned(v, items, f"{path}[{i}]", False)]
    if not isinstance(value, dict) or schema.get("x-kubernetes-preserve-unknown-fields"):
        return []
    known = schema.get("properties") or {}
    extra = schema.get("additionalProperties")
    # an embedded resource keeps its apiVersion, kind and metadata, as the root does
    keep = _ROOT if root or schema.get("x-kubernetes-embedded-resource") else set()
    found = []
    for key, v in value.items():
        where = f"{path}.{key}" if path else key
        if key in known:
            if not (root and key == "metadata"):
                found += pruned(v, known[key], where, False)
        elif isinstance(extra, dict):
            found += pruned(v, extra, where, False)
        elif extra is True or key in keep:
            continue
        else:
            found.append(where)
    return found
