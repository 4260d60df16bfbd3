"""An mkdocs hook: the field reference of each spec dialect, written at build time from the JSON
Schema distcomp itself emits (``distcomp.spec.json_schema``, the tree its validator walks), so
the page cannot drift from the code. A page asks for a dialect's tables with a line
``<!-- schema-reference: sdk -->`` (or ``v2``, ``draft``)."""

from __future__ import annotations

import re
from typing import Any

MARKER = re.compile(r"^<!-- schema-reference: (\w+) -->$", re.M)
# a case-insensitive name as the schema spells it: [aA][nN][yY] -> any
_CASELESS = re.compile(r"\[([a-zA-Z])([a-zA-Z])\]")


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    return MARKER.sub(lambda m: reference(m.group(1)), markdown)


def reference(dialect: str) -> str:
    from distcomp.spec import json_schema

    schema = json_schema(dialect)
    rows: list[tuple[str, str, str, str]] = []
    _walk(schema, "", rows)
    lines = [f"*Generated from `distcomp schema --dialect {dialect}` ({schema['title']}).*", "",
             "| field | type | required | meaning |", "|---|---|---|---|"]
    lines += [f"| `{path}` | {kind} | {required} | {text} |" for path, kind, required, text in rows]
    return "\n".join(lines) + "\n"


def _walk(node: dict[str, Any], prefix: str, rows: list[tuple[str, str, str, str]]) -> None:
    """One row per field, depth first; a mapping of names (``inputs``) continues at ``inputs.NAME``."""
    required = set(node.get("required", ()))
    for name, sub in node.get("properties", {}).items():
        path = f"{prefix}{name}"
        rows.append((path, _kind(sub), "yes" if name in required else "", _cell(sub.get("description", ""))))
        for branch in _objects(sub):
            if "properties" in branch:
                _walk(branch, f"{path}.", rows)
            extra = branch.get("additionalProperties")
            if isinstance(extra, dict):
                for item in _objects(extra):
                    if "properties" in item:
                        _walk(item, f"{path}.NAME.", rows)
    _conditional(node, prefix, rows)


def _conditional(node: dict[str, Any], prefix: str, rows: list[tuple[str, str, str, str]]) -> None:
    """The fields an ``if``/``then`` adds (an input's ``min`` only where its type is a number),
    each with the cases it applies to."""
    cases = [(_label(_condition(item["if"])), item["then"]) for item in node.get("allOf", ()) if "then" in item]
    seen = set(node.get("properties", {}))
    fields: dict[str, tuple[dict[str, Any], list[str]]] = {}
    for label, then in cases:
        for name, sub in then.get("properties", {}).items():
            if name not in seen:
                fields.setdefault(name, (sub, []))[1].append(label)
    for name, (sub, labels) in fields.items():
        where = "" if len(labels) == len(cases) else f" (where {_condition_name(cases)} is {' or '.join(labels)})"
        rows.append((f"{prefix}{name}", _kind(sub), "", _cell(sub.get("description", "")) + where))


def _condition(test: dict[str, Any]) -> dict[str, Any]:
    return next(iter(test.get("properties", {}).values()), {})


def _condition_name(cases: list[tuple[str, dict[str, Any]]]) -> str:
    return "`type`"


def _label(node: dict[str, Any]) -> str:
    text = _kind(node).replace(" (any case)", "")
    return "a file or folder type" if text.startswith("one of") else text


def _objects(node: dict[str, Any]) -> list[dict[str, Any]]:
    """The object shapes a field may take (itself, its ``anyOf`` branches, a list's items)."""
    found = []
    for option in [node, *node.get("anyOf", ()), *node.get("oneOf", ())]:
        if option.get("type") == "object" or "properties" in option:
            found.append(option)
        items = option.get("items")
        if isinstance(items, dict) and (items.get("type") == "object" or "properties" in items):
            found.append(items)
    return found


def _kind(node: dict[str, Any]) -> str:
    if "anyOf" in node or "oneOf" in node:
        kinds = dict.fromkeys(_kind(option) for option in node.get("anyOf", node.get("oneOf", ())))
        return " or ".join(kinds)
    if "enum" in node:
        return "one of " + ", ".join(f"`{value}`" for value in node["enum"])
    if "const" in node:
        return f"`{node['const']}`"
    kind = node.get("type", "any")
    if isinstance(kind, list):
        kind = " or ".join(kind)
    if "pattern" in node and node["pattern"].startswith("^(") and _CASELESS.search(node["pattern"]):
        names = _CASELESS.sub(lambda m: m.group(1).lower(), node["pattern"][2:-2]).replace("\\", "").split("|")
        return (f"`{names[0]}`" if len(names) == 1 else "one of " + ", ".join(f"`{name}`" for name in names)) + " (any case)"
    if kind == "array" and isinstance(node.get("items"), dict):
        return f"list of {_kind(node['items'])}"
    if kind == "object" and isinstance(node.get("additionalProperties"), dict) and "properties" not in node:
        return f"mapping of names to {_kind(node['additionalProperties'])}"
    return str(kind)


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")
