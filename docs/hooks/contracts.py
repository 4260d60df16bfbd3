"""An mkdocs hook: the import-linter contracts of ``pyproject.toml``, as a table, where a page
says ``<!-- import-contracts -->``; ``make test`` checks the same contracts with ``lint-imports``."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

MARKER = "<!-- import-contracts -->"


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    if MARKER not in markdown:
        return markdown
    pyproject = Path(config["config_file_path"]).parent / "pyproject.toml"
    return markdown.replace(MARKER, table(tomllib.loads(pyproject.read_text())["tool"]["importlinter"]["contracts"]))


def table(contracts: list[dict[str, Any]]) -> str:
    lines = ["| contract | kind | modules | may not import |", "|---|---|---|---|"]
    for c in contracts:
        modules = c.get("source_modules") or c.get("modules") or c.get("ancestors") or c.get("layers") or []
        banned = c.get("forbidden_modules", [])
        if c["type"] == "forbidden" and c.get("allow_indirect_imports"):
            kind = "forbidden (directly)"
        elif c["type"] == "forbidden":
            kind = "forbidden (also through another module)"
        elif c["type"] == "layers":
            kind = "layers (top to bottom: each imports only those below it)"
        else:
            kind = c["type"].replace("_", " ")
        lines.append(f"| {c['name']} | {kind} | {_names(modules)} | {_names(banned)} |")
    return "\n".join(lines) + "\n"


def _names(modules: list[str]) -> str:
    return ", ".join(f"`{m}`" for m in modules)
