"""The one error the KFP target raises: a message a user can act on, never kfp's traceback.

A message names what the caller can give in the caller's own words: ``load_component``'s
parameters from Python (``shared_volume=(CLAIM, MOUNT_PATH)``), ``distcomp compile --target
kfp``'s flags (``--volume CLAIM:MOUNT_PATH``) where the target contract called (the CLI, and
``distcomp.compile(spec, "kfp", ...)``, whose options are the flags'). ``asked(FLAGS)`` around a
call switches; ``ask("image")`` spells one."""

from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from types import MappingProxyType
from typing import Iterator, Mapping

from ...errors import UsageError


class KfpTargetError(UsageError, ValueError):
    """The spec cannot become a KFP step (unreadable spec, a name KFP cannot take, too much code
    to embed, more than one node...)."""


# each parameter as the caller gives it: (its name, the name with what it takes)
PYTHON: Mapping[str, tuple[str, str]] = MappingProxyType({
    "nodes": ("nodes", "nodes=N"), "nproc_per_node": ("nproc_per_node", "nproc_per_node=N"),
    "image": ("image", "image=IMAGE"), "shared_volume": ("shared_volume", "shared_volume=(CLAIM, MOUNT_PATH)"),
    "code_path": ("code_path", "code_path=PATH"), "job_options": ("job_options", "job_options={NAME: VALUE}"),
    "timeout": ("timeout", "timeout=SECONDS"), "poll": ("poll", "poll=SECONDS"),
    "max_restarts": ("max_restarts", "max_restarts=K")})
FLAGS: Mapping[str, tuple[str, str]] = MappingProxyType({
    "nodes": ("--nodes", "--nodes N"), "nproc_per_node": ("--nproc-per-node", "--nproc-per-node N"),
    "image": ("--image", "--image IMAGE"), "shared_volume": ("--volume", "--volume CLAIM:MOUNT_PATH"),
    "code_path": ("--code-path", "--code-path PATH"), "job_options": ("--job-option", "--job-option NAME=VALUE"),
    "max_restarts": ("--max-restarts", "--max-restarts K"),
    # no flag: only load_component/compile_component take them
    "timeout": ("timeout", "load_component's timeout= (no flag)"),
    "poll": ("poll", "load_component's poll= (no flag)")})

_SPELLING: ContextVar[Mapping[str, tuple[str, str]]] = ContextVar("distcomp_kfp_spelling", default=PYTHON)


def ask(param: str, value: str | None = None) -> str:
    """``param`` as the caller gives it: with what it takes (``--volume CLAIM:MOUNT_PATH``), or
    with ``value`` (``--nodes 1``, ``nodes=1``)."""
    name, form = _SPELLING.get()[param]
    if value is None:
        return form
    return f"{name} {value}" if name.startswith("-") else f"{name}={value}"


def name(param: str) -> str:
    """``param``'s bare name as the caller gives it (``--nproc-per-node``, ``nproc_per_node``)."""
    return _SPELLING.get()[param][0]


@contextmanager
def asked(spelling: Mapping[str, tuple[str, str]]) -> Iterator[None]:
    """Messages raised inside name the parameters as ``spelling`` does."""
    token = _SPELLING.set(spelling)
    try:
        yield
    finally:
        _SPELLING.reset(token)
