"""Diagnostics: one record per problem, printed as ``FILE:LINE:COL: path: message``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Literal, Sequence

from ..errors import UsageError

Severity = Literal["error", "warning"]
DocPath = tuple[object, ...]  # keys and list indexes from the document root, e.g. ("inputs", "lr", "min")


@dataclass(frozen=True)
class Diagnostic:
    """One problem in one spec, located to a line and column (1-based)."""

    file: str
    line: int
    col: int
    path: str
    message: str
    severity: Severity = "error"
    expected: str | None = None
    got: str | None = None
    hint: str | None = None

    def __str__(self) -> str:
        text = f"{self.file}:{self.line}:{self.col}: {self.path}: {self.message}"
        if self.expected is not None or self.got is not None:
            parts = [p for p in (
                f"expected {self.expected}" if self.expected is not None else None,
                f"got {self.got}" if self.got is not None else None,
            ) if p]
            text += f" ({', '.join(parts)})"
        if self.hint:
            text += f"; {self.hint}"
        if self.severity == "warning":
            text += " [warning]"
        return text


class SpecError(UsageError, ValueError):
    """A spec could not be loaded; carries every error found in one pass."""

    def __init__(self, diagnostics: Sequence[Diagnostic]) -> None:
        self.diagnostics: tuple[Diagnostic, ...] = tuple(diagnostics)
        super().__init__("\n".join(str(d) for d in self.diagnostics))


def closest(word: str, choices: Iterable[str]) -> str | None:
    """The choice ``word`` most likely misspells (ignoring case), or None."""
    lowered = {c.lower(): c for c in choices}
    if word.lower() in lowered:
        return lowered[word.lower()] if lowered[word.lower()] != word else None
    import difflib  # only for a misspelling: not on every load

    close = difflib.get_close_matches(word.lower(), list(lowered), n=1, cutoff=0.75)
    return lowered[close[0]] if close else None


def did_you_mean(word: str, choices: Iterable[str]) -> str | None:
    """A ``did you mean 'x'?`` hint for a misspelt key or name, or None."""
    best = closest(word, choices)
    return f"did you mean '{best}'?" if best else None


def one_of(choices: Iterable[str]) -> str:
    """``one of: a, b, c`` for an expected-value clause."""
    return "one of: " + ", ".join(sorted(choices))


def show(value: object) -> str:
    """How a user's value appears in a message: strings quoted, the rest by YAML name."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return str(value)


@dataclass
class Problems:
    """Collects diagnostics for one file while a dialect walks it."""

    file: str
    positions: "PositionLookup"
    items: list[Diagnostic] = field(default_factory=list)

    def add(self, path: DocPath, message: str, *, expected: str | None = None,
            got: str | None = None, hint: str | None = None, at_key: bool = False,
            severity: Severity = "error") -> None:
        line, col = self.positions.locate(path, at_key=at_key)
        self.at(line, col, path, message, expected=expected, got=got, hint=hint, severity=severity)

    def at(self, line: int, col: int, path: DocPath, message: str, *, expected: str | None = None,
           got: str | None = None, hint: str | None = None, severity: Severity = "error") -> None:
        """Add a problem at an explicit position (inside a multi-line command, say)."""
        self.items.append(Diagnostic(self.file, line, col, dotted(path), message, severity, expected, got, hint))

    def warn(self, path: DocPath, message: str, **kw: object) -> None:
        self.add(path, message, severity="warning", **kw)  # type: ignore[arg-type]

    @property
    def errors(self) -> list[Diagnostic]:
        return [d for d in self.items if d.severity == "error"]


class PositionLookup:
    """Protocol-like base: maps a document path to a (line, col)."""

    def locate(self, path: DocPath, *, at_key: bool = False) -> tuple[int, int]:
        raise NotImplementedError


def dotted(path: Sequence[object]) -> str:
    """``inputs.epochs.default`` / ``launcher.args[2]``; ``<document>`` for the root."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out or "<document>"
