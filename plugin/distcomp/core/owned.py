"""What distcomp may replace: only what it wrote, and never a protected place.

A folder distcomp writes whole (``build-context``, ``export``) holds ``_files.MARKER``, and
``--force`` replaces a folder that holds anything only when it holds that marker. A file it
writes (``compile --out``, ``schema --out``) carries ``MARK``: a ``#`` comment line at the top
of YAML (at the end of a ``#!`` script, whose first lines are its interpreter's and a
scheduler's), or a JSON object's first key, ``"$comment"``; another format is not marked. Such a file
is written over again as it is; any other existing file needs ``--force``. Whatever ``--force``
says, never a place of ``distcomp.base.places.protected`` (``/``, a system folder, ``$HOME``, a
registry or anything in it, the code folder or a folder holding it), the spec being compiled,
or a file of the code folder that distcomp did not write.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..spec import ComponentSpec

__all__ = ["MARK", "file_problem", "folder_problem", "is_marked_file", "mark_file", "mark_text"]

MARK = "Written by distcomp"
_HEAD = 3  # the lines of a file where the mark is looked for
_JSON_OPEN = re.compile(r"\{(\s*)")


def folder_problem(dest: Path, code: Path | None, force: bool) -> str | None:
    """Why the folder ``dest`` must not be written (made new, or replaced with ``force``), to
    follow its path in a message, or None. A folder that holds anything and no ``force`` is the
    caller's to refuse, in its own words."""
    from ..base.files import MARKER, is_marked
    from ..base.places import protected

    why = protected(dest, code)
    if why:
        return f"{why}: distcomp never writes or replaces it; give a new folder of its own"
    try:
        used = dest.is_dir() and any(dest.iterdir())
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc}); give a new folder of its own"
    if used and force and not is_marked(dest):
        return (f"was not written by distcomp (it holds no {MARKER}): --force replaces only a folder distcomp made; "
                "give a new or empty folder")
    return None


def file_problem(path: Path, spec: "ComponentSpec | None", force: bool, flag: str = "--out") -> str | None:
    """Why distcomp must not write the file ``path`` (``compile --out``, ``schema --out``), as
    the whole message, or None: a protected place, the spec itself, a file of the code folder
    that distcomp did not write, or (unless ``force``) any other existing file it did not write."""
    from ..base.places import protected, resolved

    shown = str(path).replace("\0", "\\0")
    code = spec.code if spec is not None else None
    why = protected(path, code)
    if why:
        return f"{flag} {shown} {why}: distcomp never writes there; give {flag} a file of its own"
    try:
        real = resolved(path)
        if spec is not None and spec.source is not None and real == spec.source.resolve():
            return f"{flag} {shown} is the spec being compiled; give {flag} a file of its own"
        if not real.is_file() or is_marked_file(real):
            return None
        if code is not None and real.is_relative_to(code.resolve()):
            return (f"{flag} {shown} is a file of the code folder {code.resolve()}, which distcomp did not write; give "
                    f"{flag} a file of its own")
    except OSError:  # protected() has said what it is
        return None
    if force:
        return None
    return (f"{flag} {shown} exists and was not written by distcomp (it carries no \"{MARK}\" mark); give --force "
            "to replace it, or another file")


def is_marked_file(path: Path) -> bool:
    """Whether the file ``path`` carries distcomp's mark in its first lines (a script: its last)."""
    try:
        with open(path, "rb") as f:
            head = f.read(4096)
            f.seek(max(0, f.seek(0, os.SEEK_END) - 4096))
            tail = f.read(4096)
    except OSError:
        return False
    first = head.decode("utf-8", "replace").splitlines()[:_HEAD]
    last = tail.decode("utf-8", "replace").splitlines()[-1:] if head.startswith(b"#!") else []
    return any(MARK in line for line in first + last)


def mark_text(text: str, by: str) -> str | None:
    """``text`` with distcomp's mark (``by``: the command that writes it), where its format
    allows a comment: a ``#!`` script (after that line), a JSON object (its ``"$comment"``),
    YAML; None for another format, which stays as it is."""
    line = f"{MARK} (`{by}`); it may write this file again."
    if text.startswith("#!"):  # its first lines are the interpreter's and a scheduler's (#SBATCH): at its end
        return f"{text}{'' if text.endswith(chr(10)) else chr(10)}# {line}\n"
    opened = _JSON_OPEN.match(text)
    if opened:
        try:
            data = json.loads(text)
        except ValueError:
            data = None
        if isinstance(data, dict):
            if not data:
                return json.dumps({"$comment": line}) + "\n"
            if "$comment" not in data:
                space = opened.group(1)
                return "{" + space + f'"$comment": {json.dumps(line)},' + (space or " ") + text[opened.end():]
        return None
    if _is_yaml(text):
        return f"# {line}\n{text}"
    return None


def _is_yaml(text: str) -> bool:
    """Whether ``text`` is YAML of mappings or lists (a manifest, a component), where a ``#``
    line is a comment; a lone scalar (a shell script without ``#!``) is no YAML document."""
    import yaml

    try:
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError:
        return False
    return bool(docs) and all(isinstance(d, (dict, list)) for d in docs)


def mark_file(path: Path, by: str) -> None:
    """Mark the file ``path`` a writer of a target wrote (a KFP or Azure ML component), where
    its format allows it; its mode is kept."""
    from ..base.files import write_atomic

    try:
        text = path.read_text(encoding="utf-8")
        mode = path.stat().st_mode & 0o777
    except (OSError, UnicodeDecodeError):
        return
    if is_marked_file(path):
        return
    marked = mark_text(text, by)
    if marked is not None:
        write_atomic(path, marked, mode=mode)
