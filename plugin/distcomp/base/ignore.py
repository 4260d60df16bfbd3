"""What a code folder's ``.gitignore`` and ``.distcompignore`` files leave out of the code that
travels (git's rules: ``*``, ``?``, ``[...]``, ``**``, a leading or inner ``/`` anchors a pattern
to its file's folder, a trailing ``/`` matches folders only, ``!`` brings a path back unless a
folder above it is left out, the last matching line wins, a deeper file's lines after its
parents'). ``.distcompignore`` is read after ``.gitignore`` in each folder, so it can also bring
back what git ignores (``!data/small.csv``). The ``.gitignore`` files of the folders above the
code folder count too, up to the git repository's top (the nearest folder holding ``.git``)."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import AbstractSet, Callable

__all__ = ["IGNORE_FILES", "Ignores", "copy_filter", "patterns"]

IGNORE_FILES = (".gitignore", ".distcompignore")


@dataclass(frozen=True)
class _Rule:
    base: str  # the ignore file's folder, absolute, POSIX, ending in "/"
    regex: "re.Pattern[str]"
    negate: bool
    folders_only: bool


class Ignores:
    """The rules in force in one folder; ``enter(child)`` gives a child folder's."""

    def __init__(self, rules: tuple[_Rule, ...] = ()):
        self.rules = rules

    @classmethod
    def at(cls, root: Path) -> "Ignores":
        """The rules in force in ``root``: its repository's ``.gitignore`` files above it, and its own."""
        root = Path(os.path.abspath(root))
        above: list[Path] = []
        folder = root.parent
        if not (root / ".git").exists():
            while True:
                above.append(folder)
                if (folder / ".git").exists() or folder.parent == folder:
                    break
                folder = folder.parent
            if not (above[-1] / ".git").exists():
                above = []  # not in a repository: the code folder's own files only
        rules: list[_Rule] = []
        for folder in reversed(above):
            rules.extend(_read(folder, (".gitignore",)))
        return cls(tuple(rules)).enter(root)

    def enter(self, folder: Path) -> "Ignores":
        own = _read(folder, IGNORE_FILES)
        return Ignores(self.rules + tuple(own)) if own else self

    def ignored(self, path: Path, is_dir: bool) -> bool:
        text = Path(path).as_posix()
        verdict = False
        for rule in self.rules:
            if (rule.folders_only and not is_dir) or not text.startswith(rule.base):
                continue
            if rule.regex.fullmatch(text[len(rule.base):]):
                verdict = not rule.negate
        return verdict


def _read(folder: Path, names: tuple[str, ...]) -> list[_Rule]:
    rules: list[_Rule] = []
    base = Path(os.path.abspath(folder)).as_posix().rstrip("/") + "/"
    for name in names:
        try:
            text = (folder / name).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        for line in text.splitlines():
            rule = _rule(base, line)
            if rule is not None:
                rules.append(rule)
    return rules


def _rule(base: str, line: str) -> _Rule | None:
    if line.endswith("\\ "):
        line = line[:-2].rstrip() + " "
    else:
        line = line.rstrip()
    if not line or line.startswith("#"):
        return None
    negate = line.startswith("!")
    if negate:
        line = line[1:]
    elif line.startswith("\\"):  # \# and \! stand for themselves
        line = line[1:]
    folders_only = line.endswith("/")
    line = line.rstrip("/")
    if not line:
        return None
    anchored = "/" in line
    line = line.lstrip("/")
    body = _glob(line)
    regex = re.compile(body if anchored else f"(?:.*/)?{body}", re.DOTALL)
    return _Rule(base, regex, negate, folders_only)


def _glob(pattern: str) -> str:
    """A gitignore glob as a regular expression of a path relative to its file's folder."""
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if pattern.startswith("**/", i) and (i == 0 or pattern[i - 1] == "/"):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i) and i + 2 == n and (i == 0 or pattern[i - 1] == "/"):
            out.append(".*")
            i += 2
        elif c == "*":
            out.append("[^/]*")
            i += 1
        elif c == "?":
            out.append("[^/]")
            i += 1
        elif c == "[":
            end = pattern.find("]", i + 2 if pattern[i + 1:i + 2] in ("!", "^", "]") else i + 1)
            if end < 0:
                out.append(re.escape(c))
                i += 1
                continue
            inner = pattern[i + 1:end]
            if inner[:1] in ("!", "^"):
                inner = "^" + inner[1:]
            out.append(f"[{inner.replace(chr(92), chr(92) * 2)}]")
            i = end + 1
        elif c == "\\" and i + 1 < n:
            out.append(re.escape(pattern[i + 1]))
            i += 2
        else:
            out.append(re.escape(c))
            i += 1
    return "".join(out)


def copy_filter(root: Path, skip: AbstractSet[str] = frozenset()) -> Callable[[str, list[str]], set[str]]:
    """An ``ignore=`` for ``shutil.copytree(root, ...)`` and a filter for ``os.walk(root)``: the
    names in ``skip`` and what the ignore files leave out, folder by folder (top-down, as both
    visit them)."""
    root = Path(os.path.abspath(root))
    rules: dict[Path, Ignores] = {}

    def ignore(folder: str, names: list[str]) -> set[str]:
        here = Path(os.path.abspath(folder))
        ignores = rules.get(here)
        if ignores is None:
            parent = rules.get(here.parent)
            ignores = parent.enter(here) if parent is not None and here != root else Ignores.at(here)
            rules[here] = ignores
        return {n for n in names if n in skip
                or ignores.ignored(here / n, is_dir=os.path.isdir(here / n) and not os.path.islink(here / n))}
    return ignore


def patterns(root: Path, name: str = ".distcompignore", skip: AbstractSet[str] = frozenset()) -> list[str]:
    """The lines of every ``name`` file under ``root`` as gitignore patterns relative to
    ``root`` (each anchored to its file's folder), in the order git applies them: for a shipper
    that matches paths itself from one list (Ray's ``excludes``). Folders named in ``skip`` are
    not searched."""
    root = Path(os.path.abspath(root))
    out: list[str] = []
    for folder, dirs, names in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in skip)
        if name not in names:
            continue
        rel = Path(folder).relative_to(root).as_posix()
        prefix = "" if rel == "." else rel + "/"
        try:
            text = (Path(folder) / name).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        for line in text.splitlines():
            line = line.rstrip() if not line.endswith("\\ ") else line
            if not line or line.startswith("#"):
                continue
            bang = "!" if line.startswith("!") else ""
            body = line[1:] if bang else line
            trail = "/" if body.endswith("/") else ""
            core = body.rstrip("/")
            if not core:
                continue
            if "/" in core:  # anchored to its file's folder
                out.append(f"{bang}{prefix or '/'}{core.lstrip('/')}{trail}")
            else:  # at any depth below its file's folder
                out.append(f"{bang}{prefix}**/{core}{trail}" if prefix else f"{bang}{core}{trail}")
    return out
