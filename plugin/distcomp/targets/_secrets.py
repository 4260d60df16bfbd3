"""A job's secrets kept out of a shell script that runs it (an sbatch script): the script reads
them from a file of its own, mode 600, and names them where the command has them.

The file holds the job's masker's needles (``distcomp.base.redact.Masker``), one shell variable each
(``DISTCOMP_SECRET_0=...``, not exported: the batch shell expands them into the command, the
ranks' environment never holds them). Each text the masker masks in a word of the command, or in
a variable's value, is written as ``"${DISTCOMP_SECRET_N}"`` instead: the word the shell builds is
the same, and the script holds nothing to mask. A process that did not submit the job (``distcomp
status`` from another shell) gets the job's masker back from the same file.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path

from ..base.redact import NONE, Masker

NAME = "secrets.sh"
VAR = "DISTCOMP_SECRET_"
HEADER = "# distcomp: this job's secrets, read by its script (mode 600: only its owner reads it)\n"


def shell_word(word: str, masker: Masker) -> str:
    """``word`` quoted for the shell, each secret in it a reference to the file's variable."""
    if not masker:
        return shlex.quote(word)
    index = {n: i for i, n in enumerate(masker.needles)}
    pieces = masker.pieces(word)
    if not pieces:
        return "''"
    return "".join(f'"${{{VAR}{index[p]}}}"' if secret else shlex.quote(p) for p, secret in pieces)


def shell_line(argv: list[str], masker: Masker) -> str:
    """``shlex.join(argv)``, each secret a reference."""
    return " ".join(shell_word(word, masker) for word in argv)


def write(path: Path, masker: Masker) -> None:
    """The file, created mode 600 (never readable by others, not even a moment); it must not exist."""
    text = HEADER + "".join(f"{VAR}{i}={shlex.quote(n)}\n" for i, n in enumerate(masker.needles))
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.fchmod(fd, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)


def read(path: Path) -> Masker:
    """The masker the file was written from; no file (a job without secrets): masks nothing."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return NONE
    words = shlex.split(text, comments=True, posix=True)
    return Masker(tuple(value for name, _eq, value in (w.partition("=") for w in words) if name.startswith(VAR)))
