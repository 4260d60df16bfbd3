"""What exec lets reach a program: no NUL byte anywhere, at most MAX_ARG_STRLEN bytes in one
argument or environment string, and argv plus environment within ARG_MAX. A value that breaks
these can never run, so it is refused where it is written, not when a rank fails to start."""

from __future__ import annotations

import os
from typing import Any, Mapping, Sequence

from ._diagnostics import DocPath, Problems

NAME_MAX = 255  # Linux: bytes in one file name
# the longest tail distcomp puts after a component's name in a folder's name (a submitted job's
# ``NAME-YYYYmmdd-HHMMSS-xxxxxx``); a longer name would make a run that can never start
NAME_SUFFIX = len("-YYYYmmdd-HHMMSS-xxxxxx")
MAX_NAME = NAME_MAX - NAME_SUFFIX
NAME_WHY = f"a job's folder is named NAME-TIME-ID, and a file name has at most {NAME_MAX} bytes: shorten it"
UTF8_HINT = "give the value as UTF-8 text (binary data goes in a file: a path input)"
MAX_ARG_STRLEN = 32 * 4096  # Linux: one argv/env string, its terminating NUL included (128 KiB)
LAUNCHER_ROOM = 16 * 1024  # what a launcher and tracking add to a rank's argv and env (flags, TF_CONFIG, ...)
NUL_HINT = "remove it"
BIG_HINT = "pass large data in a file (a path input) instead"
_WORDS = {"default", "value", "path", "enum"}  # the keys of an input that become argument text


def _size(text: str) -> int:
    """Bytes of ``text`` as exec passes it, its NUL included."""
    return len(os.fsencode(text)) + 1


def arg_problem(text: str) -> tuple[str, str] | None:
    """Why ``text`` cannot be one argument or environment string, and what to do; or None."""
    if "\0" in text:
        return "holds a NUL byte (\\0), which no program argument or environment variable can carry", NUL_HINT
    size = _size(text)
    if size > MAX_ARG_STRLEN:
        return (f"is {size - 1} bytes, over Linux's limit of {MAX_ARG_STRLEN - 1} bytes for one argument or "
                f"environment string (MAX_ARG_STRLEN, 128 KiB)", BIG_HINT)
    return None


def utf8_problem(text: str) -> str | None:
    """Why ``text`` is not UTF-8 text, or None. Bytes that are not UTF-8 reach Python from argv
    as lone surrogates (surrogateescape): exec could pass them, but no MLflow store, JSON record
    or console takes them, so a value holding one is refused before anything is made."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        char = text[exc.start]
        # a surrogateescape'd byte shows as that byte; any other lone surrogate as itself
        what = (f"byte 0x{ord(char) - 0xDC00:02x}" if 0xDC80 <= ord(char) <= 0xDCFF else
                f"a lone surrogate (U+{ord(char):04X})")
        return f"is not valid UTF-8 ({what} at character {exc.start + 1})"
    return None


def arg_max() -> int | None:
    """This machine's limit on argv plus environment (``getconf ARG_MAX``); None if unknown."""
    try:
        value = os.sysconf("SC_ARG_MAX")
    except (AttributeError, ValueError, OSError):
        return None
    return value if value > 0 else None


def command_problems(argv: Sequence[str], env: Mapping[str, str], limit: int | None = None) -> list[str]:
    """Why a rendered command cannot be exec'd with ``env``: each word too long, or the whole
    too large for this machine (counted as the kernel counts: each string, its NUL, a pointer)."""
    problems = []
    for i, word in enumerate(argv):
        problem = arg_problem(word)
        if problem:
            problems.append(f"argument {i} of the command ({_start(word)}) {problem[0]}; {problem[1]}")
    limit = arg_max() if limit is None else limit
    if limit is None:  # no sysconf here: exec will say
        return problems
    total = sum(_size(w) + 8 for w in argv) + sum(_size(f"{k}={v}") + 8 for k, v in env.items())
    if total + LAUNCHER_ROOM > limit:
        problems.append(f"the command line and its environment come to {total} bytes; with the "
                        f"{LAUNCHER_ROOM // 1024} KiB a launcher adds, that is over this machine's limit of {limit} "
                        f"bytes (ARG_MAX); {BIG_HINT}")
    return problems


def _start(word: str) -> str:
    return repr(word[:20] + "...") if len(word) > 20 else repr(word)


def check_document(data: Any, problems: Problems, path: DocPath = ()) -> None:
    """Report, where it is written, every NUL byte in the document and every input value or
    environment variable that could not be passed to a program."""
    if isinstance(data, dict):
        for key, value in data.items():
            if "\0" in key:
                problems.add(path + (key,), "the key holds a NUL byte (\\0)", hint=NUL_HINT, at_key=True)
            if path[-1:] == ("environment_variables",) and isinstance(value, str) and "\0" not in key + value:
                _check_word(f"{key}={value}", path + (key,), problems, "the environment variable")
            check_document(value, problems, path + (key,))
    elif isinstance(data, list):
        for i, value in enumerate(data):
            check_document(value, problems, path + (i,))
    elif isinstance(data, str):
        if _is_input_value(path):
            _check_word(data, path, problems, "the value")
        elif "\0" in data:
            _check_word(data, path, problems, "the text")


def _is_input_value(path: DocPath) -> bool:
    """``inputs.x`` (a job's literal value), ``inputs.x.default|value|path``, ``inputs.x.enum[i]``."""
    if len(path) < 2 or path[0] != "inputs":
        return False
    return len(path) == 2 or path[2] in _WORDS


def _check_word(text: str, path: DocPath, problems: Problems, what: str) -> None:
    problem = arg_problem(text)
    if problem:
        problems.add(path, f"{what} {problem[0]}", hint=problem[1])
