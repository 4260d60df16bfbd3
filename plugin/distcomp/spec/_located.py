"""A parsed document: its plain values and where each key and value was written."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ._diagnostics import DocPath, PositionLookup


@dataclass
class Located(PositionLookup):
    """The document's data and where each part of it was written."""

    file: str
    data: Any = None
    values: dict[DocPath, tuple[int, int]] = field(default_factory=dict)
    keys: dict[DocPath, tuple[int, int]] = field(default_factory=dict)

    def locate(self, path: DocPath, *, at_key: bool = False) -> tuple[int, int]:
        """Position of ``path``; falls back to the nearest enclosing part that exists."""
        table = (self.keys, self.values) if at_key else (self.values, self.keys)
        probe = tuple(path)
        while True:
            for t in table:
                if probe in t:
                    return t[probe]
            if not probe:
                return (1, 1)
            probe = probe[:-1]
