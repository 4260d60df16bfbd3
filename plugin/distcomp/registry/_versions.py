"""Versions as the registry names, orders and selects them.

PEP 440 through ``packaging``: its ``Version`` parses and orders, its ``SpecifierSet``
matches. Distcomp's own parts: a version's folder is its canonical form, the normal form with
the release padded to three parts, so the equal versions 1.2 and 1.2.0 share one folder
(packaging has no such spelling: ``str(Version("1.2"))`` is 1.2); npm-style ``^``/``~`` ranges
become PEP 440 specifiers.

Two shortcuts are hand-written for speed, each measured against packaging alone (picks among
10,000 versions, medians of 5 interleaved processes, load 10 on 2 cores): a folder named plain
``X.Y.Z`` is read by a regex, not parsed into a ``Version`` (among such folders the release
order is PEP 440's), so a process's first pick takes 36-54 ms, not 150-260 ms; ``_bounds``
filters a range's candidates by their release numbers before ``packaging`` decides, so a repeated
range pick takes 5-12 ms, not 200-340 ms with packaging 23-25 (pyproject accepts them, MLflow
3.7-3.9 require them; packaging 26's ``SpecifierSet.filter`` is fast enough alone: 13-17 ms).
Every result is cached. ``packaging`` is imported on first use.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import TYPE_CHECKING, Container, Iterable

from ._records import Reference, RegistryError

if TYPE_CHECKING:
    from packaging.specifiers import SpecifierSet
    from packaging.version import Version

__all__ = ["canonical", "info", "pick", "selector", "sort_key"]

_PLAIN = re.compile(r"(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\Z")
_SHORT = re.compile(r"(0|[1-9][0-9]*)(?:\.(0|[1-9][0-9]*))?(?:\.(0|[1-9][0-9]*))?\Z")  # ^ and ~ operands
_WILDCARD = re.compile(r"[0-9]+(?:\.[0-9]+)*\.\*\Z")  # 1.* , 1.2.*
EXPECTED = ("an exact version (1.2.0), latest, ^1.2, ~1.2.3, 1.*, or a PEP 440 range such as '>=1.0,<2'")

# folder -> (epoch, release without trailing zeros, is a plain X.Y.Z, is a pre-release), or None
Info = tuple[int, tuple[int, ...], bool, bool]
_infos: dict[str, Info | None] = {}


def parse(text: str) -> "Version":
    from packaging.version import InvalidVersion, Version

    try:
        return Version(text)
    except InvalidVersion:
        raise RegistryError(f"invalid version {text!r}: expected a PEP 440 version such as 1.2.0") from None


def _strip(release: tuple[int, ...]) -> tuple[int, ...]:
    end = len(release)
    while end > 1 and release[end - 1] == 0:
        end -= 1
    return release[:end]


def _form(v: "Version") -> str:
    release = list(v.release)
    while len(release) > 3 and release[-1] == 0:
        release.pop()
    text = (f"{v.epoch}!" if v.epoch else "") + ".".join(map(str, release + [0] * (3 - len(release))))
    if v.pre is not None:
        text += f"{v.pre[0]}{v.pre[1]}"
    if v.post is not None:
        text += f".post{v.post}"
    if v.dev is not None:
        text += f".dev{v.dev}"
    return text + (f"+{v.local}" if v.local else "")


def canonical(text: str) -> str:
    """The folder name of version ``text``: 1.2 -> 1.2.0, 1.0.0-RC1 -> 1.0.0rc1, v2 -> 2.0.0."""
    return text if _PLAIN.match(text) else _form(parse(text))


def info(folder: str) -> tuple[tuple[int, ...], bool] | None:
    """(release, is a pre-release) of a version folder; None for a name that is not a
    canonical version (a stray or temporary entry)."""
    found = _info(folder)
    return None if found is None else (found[1], found[3])


def _info(folder: str) -> Info | None:
    try:
        return _infos[folder]
    except KeyError:
        pass
    m = _PLAIN.match(folder)
    if m:
        found: Info | None = (0, _strip((int(m[1]), int(m[2]), int(m[3]))), True, False)
    else:
        try:
            v = sort_key(folder)
            found = (v.epoch, _strip(v.release), False, v.is_prerelease) if _form(v) == folder else None
        except RegistryError:  # not a version at all
            found = None
    if len(_infos) > 1_000_000:  # a long-lived process looking at many registries
        _infos.clear()
    _infos[folder] = found
    return found


@lru_cache(maxsize=1 << 16)
def sort_key(folder: str) -> "Version":
    """The version a folder names, as ``packaging`` orders it."""
    return parse(folder)


# -- selectors ------------------------------------------------------------------------------------

def _bump(parts: list[int], index: int) -> str:
    return ".".join(map(str, [*parts[:index], parts[index] + 1]))


def _operand(text: str, op: str, ref: str) -> list[int]:
    m = _SHORT.match(text)
    if not m:
        raise RegistryError(f"invalid version selector {op + text!r} in {ref!r}: {op} takes a release such as "
                            f"{op}1.2 or {op}1.2.3 (digits only)")
    return [int(p) for p in m.groups() if p is not None]


def translate(text: str, ref: str = "") -> str:
    """``^1.2`` -> ``>=1.2,<2``, ``^0.2.3`` -> ``>=0.2.3,<0.3``, ``~1.2.3`` -> ``>=1.2.3,<1.3``
    (npm's rules), ``1.*`` -> ``==1.*``; anything else is returned as it is."""
    if text.startswith("^"):
        parts = _operand(text[1:], "^", ref)
        first = next((i for i, p in enumerate(parts) if p), len(parts) - 1)  # the left-most non-zero part
        return f">={text[1:]},<{_bump(parts, first)}"
    if text.startswith("~") and not text.startswith("~="):
        parts = _operand(text[1:], "~", ref)
        return f">={text[1:]},<{_bump(parts, 1 if len(parts) > 1 else 0)}"
    if _WILDCARD.match(text):
        return f"=={text}"
    return text


def selector(name: str, text: str) -> Reference:
    """The Reference of ``name`` and selector ``text`` (an exact version, latest, or a range)."""
    ref = f"{name}@{text}"
    compact = "".join(text.split())
    if not compact:
        raise RegistryError(f"{ref!r} has no version after '@': expected {EXPECTED}")
    if compact == "latest":
        return Reference(name, compact, "latest")
    from packaging.version import InvalidVersion, Version

    try:
        return Reference(name, compact, "exact", version=_form(Version(compact)))
    except InvalidVersion:
        pass
    specifier = translate(compact, ref)
    try:
        specifiers(specifier)
    except RegistryError:
        raise RegistryError(f"invalid version selector {text!r} in {ref!r}: expected {EXPECTED}") from None
    return Reference(name, compact, "range", specifier=specifier)


@lru_cache(maxsize=256)
def specifiers(text: str) -> "SpecifierSet":
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    try:
        found = SpecifierSet(text)
    except InvalidSpecifier:
        raise RegistryError(f"invalid range {text!r}") from None
    if not len(found):
        raise RegistryError(f"invalid range {text!r}")
    return found


Bounds = tuple[tuple[int, ...] | None, tuple[int, ...] | None, tuple[int, ...] | None]  # low, high, below


@lru_cache(maxsize=256)
def _bounds(text: str) -> Bounds | None:
    """Release tuples every match lies within: >= low, <= high, < below (each may be None).
    Only a quick filter: ``packaging`` decides for what passes. None when it cannot tell."""
    low = high = below = None
    for spec in specifiers(text):
        op, raw = spec.operator, spec.version
        if op in ("!=",):
            continue
        if op == "===":
            return None
        v = parse(raw[:-2] if raw.endswith(".*") else raw)
        if v.epoch:
            return None
        release = _strip(v.release)
        if op in (">=", ">", "~=", "==") and (low is None or release > low):
            low = release
        if op in ("<=", "<") or (op == "==" and not raw.endswith(".*")):
            high = release if high is None else min(high, release)
        if raw.endswith(".*") or op == "~=":
            prefix = v.release if op == "==" else v.release[:-1]
            end = _strip((*prefix[:-1], prefix[-1] + 1))
            below = end if below is None else min(below, end)
    return low, high, below


def _inside(release: tuple[int, ...], bounds: Bounds) -> bool:
    low, high, below = bounds
    return ((low is None or release >= low) and (high is None or release <= high)
            and (below is None or release < below))


Candidate = tuple[Info, str]


def _top(group: list[Candidate]) -> Candidate:
    if all(c[0][2] for c in group):  # plain X.Y.Z only: the release order is PEP 440's
        return max(group)
    return max(group, key=lambda c: sort_key(c[1]))


def _highest(group: list[Candidate], spec: "SpecifierSet", bounds: Bounds | None) -> str | None:
    if bounds is not None:
        group = [c for c in group if c[0][0] or _inside(c[0][1], bounds)]  # another epoch: packaging decides
    if not group:
        return None
    best = _top(group)[1]
    if spec.contains(sort_key(best), prereleases=True):
        return best
    matching = set(spec.filter((sort_key(c[1]) for c in group), prereleases=True))
    group = [c for c in group if sort_key(c[1]) in matching]
    return _top(group)[1] if group else None


def pick(folders: Iterable[str], skip: Container[str], ref: Reference) -> str | None:
    """The version ``ref`` (latest or a range) selects among ``folders``, never one in ``skip``
    (the deprecated ones): the highest final release that matches; pre-releases only when the
    range names one (``>=2.0rc1``) or when no final release matches."""
    finals: list[Candidate] = []
    pres: list[Candidate] = []
    known = _infos.get
    for folder in folders:
        found = known(folder) or _info(folder)
        if found is not None and folder not in skip:
            (pres if found[3] else finals).append((found, folder))
    if ref.kind == "latest":
        group = finals or pres
        return _top(group)[1] if group else None
    assert ref.specifier is not None
    spec = specifiers(ref.specifier)
    bounds = _bounds(ref.specifier)
    first, then = (finals + pres, []) if spec.prereleases else (finals, pres)
    return _highest(first, spec, bounds) or _highest(then, spec, bounds)
