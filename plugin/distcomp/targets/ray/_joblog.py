"""Reading a Ray job's log (the driver's output, as the Jobs API keeps it): the ranks' lines
(``[rankN] ...``, echoed by the node agents), and the driver's last word on the job's end
(``DISTCOMP_RAY_OUTCOME {...}``, see ``_driver``)."""

from __future__ import annotations

import json
import re
from typing import Any, Iterable, Iterator

OUTCOME = "DISTCOMP_RAY_OUTCOME "  # as _driver writes it (kept in step by a test)
_TAG = re.compile(r"^\[(?P<name>[a-z][a-z0-9_-]*)\] ?")


def outcome(text: str) -> dict[str, Any] | None:
    """The driver's outcome record, if it wrote one."""
    for line in reversed(text.splitlines()):
        if line.startswith(OUTCOME):
            try:
                data = json.loads(line[len(OUTCOME):])
            except ValueError:
                return None
            return data if isinstance(data, dict) else None
    return None


def lines(chunks: Iterable[str]) -> Iterator[str]:
    """Whole lines (without their newline) of a log that arrives in chunks cut anywhere; the
    last, unended line once the chunks end."""
    rest = ""
    for chunk in chunks:
        rest += chunk
        *whole, rest = rest.split("\n")
        yield from whole
    if rest:
        yield rest


def replica_lines(lines: Iterable[str], name: str) -> Iterable[str]:
    """The lines of one replica (``rank3``), its ``[rank3]`` tag removed."""
    for line in lines:
        m = _TAG.match(line)
        if m and m.group("name") == name:
            yield line[m.end():]


def names(text: str) -> list[str]:
    """The replicas that printed in the log, in the order they first did."""
    seen: dict[str, None] = {}
    for line in text.splitlines():
        m = _TAG.match(line)
        if m:
            seen.setdefault(m.group("name"))
    return list(seen)


def tail(text: str, n: int) -> str:
    lines = [line for line in text.splitlines() if not line.startswith(OUTCOME)][-n:]
    return "\n".join("    " + line for line in lines) or "    (empty log)"
