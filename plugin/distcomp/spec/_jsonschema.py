"""The JSON Schema of a dialect, generated from the same tree the validator walks."""

from __future__ import annotations

from typing import Any, Mapping

from ._loader import DIALECTS
from ._types import installed_launchers

SCHEMA_ID = "https://distcomp.dev/schemas/distributed-component.schema.json"


def json_schema(dialect: str = "sdk", launchers: Mapping[str, str] | None = None) -> dict[str, Any]:
    """A draft 2020-12 JSON Schema for ``dialect`` (default: DistributedComponent); its launcher
    names are ``launchers``, by default every launcher installed (plugins included)."""
    body = DIALECTS[dialect].schema(installed_launchers() if launchers is None else launchers).json()
    head: dict[str, Any] = {"$schema": "https://json-schema.org/draft/2020-12/schema",
                            "title": DIALECTS[dialect].name}
    if dialect == "sdk":
        head["$id"] = SCHEMA_ID
    return {**head, **body}
