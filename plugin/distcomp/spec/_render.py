"""How a typed value appears on a command line: below both the spec model (which renders its
defaults) and the input checks (which take the model's types), so neither imports the other."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any


def render_value(value: Any) -> str:
    """How a typed value appears as (part of) one argument."""
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, float):
        return repr(value)
    return os.fspath(value) if isinstance(value, Path) else str(value)
