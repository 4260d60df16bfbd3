"""The DistributedComponent YAML text of a function component: what ``export`` writes, and what
``FunctionComponent.spec`` loads with the normal loader, so the two never differ.

The command calls the runner with each value as ``--NAME VALUE`` (one quoted word each, as the
spec's templating puts every value in), an optional input's pair in an optional block:

    python -m distcomp.function.run pkg.mod:train --epochs {inputs.epochs} [--data {inputs.data}] --model {outputs.model}
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from ._signature import Param

__all__ = ["RUNNER", "Settings", "command", "spec_text"]

RUNNER = "distcomp.function.run"


@dataclass(frozen=True)
class Settings:
    """What the decorator was told, beyond the signature."""

    name: str
    version: str | None
    launcher: str
    nodes: int
    nproc_per_node: int
    image: str | None
    packages: tuple[str, ...]
    env: Mapping[str, str]
    description: str | None
    max_restarts: int = 0


def command(target: str, params: tuple[Param, ...], path: str = "", source: str | None = None) -> str:
    """The runner's command line, as a template (``path``: the module's folder in the code
    folder; ``source``: the function's, for one with no file, sent inline)."""
    inline: tuple[str, ...] = ()
    if source is not None:
        from ._inline import encode

        inline = ("--inline", encode(source, params))
    words = ["python", "-m", RUNNER, *(("--path", path) if path else ()), *inline, target]
    for p in params:
        pair = f"--{p.name} {{{'outputs' if p.kind == 'output' else 'inputs'}.{p.name}}}"
        words.append(f"[{pair}]" if p.optional else pair)
    return " ".join(words)


def spec_text(settings: Settings, params: tuple[Param, ...], target: str, code: str, path: str = "",
              source: str | None = None) -> str:
    """The YAML text; ``code``: the code folder, relative to the file's folder."""
    doc: dict[str, Any] = {"name": settings.name}
    if settings.version is not None:
        doc["version"] = settings.version
    doc["type"] = "DistributedComponent"
    if settings.description:
        doc["description"] = settings.description
    doc["tags"] = {"distcomp.function": target}
    inputs = {p.name: _input(p) for p in params if p.kind != "output"}
    outputs = {p.name: {"type": "path"} for p in params if p.kind == "output"}
    if inputs:
        doc["inputs"] = inputs
    if outputs:
        doc["outputs"] = outputs
    doc["launcher"] = {"type": settings.launcher, "node_count": settings.nodes,
                       "process_count_per_node": settings.nproc_per_node,
                       "additional_arguments": command(target, params, path, source)}
    if settings.max_restarts:
        doc["launcher"]["max_restarts"] = settings.max_restarts
    environment: dict[str, Any] = {}
    if settings.image:
        environment["docker"] = {"image": settings.image}
    if settings.packages:
        environment["conda"] = {"conda_dependencies": {"dependencies": ["pip", {"pip": list(settings.packages)}]}}
    if environment:
        doc["environment"] = environment
    if settings.env:
        doc["environment_variables"] = dict(settings.env)
    doc["code"] = code
    return _dump(doc)


def _dump(doc: dict[str, Any]) -> str:
    """PyYAML's text of ``doc``, from ``distcomp.base.yamlcache`` where this very document (its
    marshal bytes: every key, value, type and order) was dumped before, so that exporting an
    unchanged function imports no PyYAML."""
    import marshal

    from ..base import yamlcache

    try:
        content = marshal.dumps(doc, 2)  # version 2 keeps no references: the same document, the same bytes
    except ValueError:  # a default marshal cannot hold: dumped each time
        content = None
    key = yamlcache.key(__file__) if content is not None else None
    found = yamlcache.get("dump", content, key) if content is not None else yamlcache.MISS
    if isinstance(found, str):
        return found
    import yaml

    text: str = yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, default_flow_style=False, width=1 << 16)
    if content is not None:
        yamlcache.put("dump", content, key, text)
    return text


def _input(p: Param) -> dict[str, Any]:
    out: dict[str, Any] = {"type": {"integer": "Integer", "number": "Float", "boolean": "Boolean",
                                    "string": "String", "enum": "Enum", "path": "path"}[p.type]}
    if p.type == "enum":
        out["enum"] = [str(m) for m in p.choices]
    if p.default is not None:
        out["default"] = str(p.default) if p.type == "enum" else p.default
    if p.optional:
        out["optional"] = True
    return out
