"""What a local job wrote into its code folder, said at the end of the run.

Ranks start in the code folder, as torchrun starts them in the current one, so what a rank
writes by a relative path (``tb/``, ``lightning_logs/``) lands in the author's source tree,
and the next publish or compile would ship it. The folder's files are listed before the ranks
start and again after, by the rules packaging follows (``distcomp.base.codefolder``: tool folders,
``.gitignore`` and ``.distcompignore`` leave files out), and the new ones are named with the fix.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Iterable

from ...base.codefolder import EXCLUDED, EXCLUDED_AT_TOP, MAX_FILES
from ...base.ignore import Ignores

if TYPE_CHECKING:
    from ...spec import ComponentSpec

SHOWN = 5  # files named in the message; the rest are counted


@dataclass(frozen=True)
class CodeWatch:
    """The code folder's files before the ranks start, to name the new ones after."""

    code: Path
    skip: frozenset[Path]
    before: frozenset[str] | None

    @classmethod
    def start(cls, spec: "ComponentSpec", skip: Iterable[Path]) -> "CodeWatch":
        """``skip``: what distcomp itself writes there (the run folder, outputs, the MLflow store). Code
        stored in a registry runs in a copy, whose leftovers the copy's end names (``_stored``)."""
        from ...registry import stored_version

        skipped = frozenset(Path(os.path.abspath(p)) for p in skip)
        before = None if stored_version(spec.code) is not None else listing(spec.code, skipped)
        return cls(spec.code, skipped, before)

    def note(self, shown: str) -> str | None:
        """The line naming the job's new files in the code folder (shown as ``shown``), if any."""
        return written_note(self.code, self.before, self.skip, shown)


def listing(code: Path, skip: Iterable[Path] = ()) -> frozenset[str] | None:
    """The files of ``code`` that packaging would take (relative POSIX paths), leaving out
    ``skip`` (the run folder, outputs, the MLflow store); None when it cannot tell (no such
    folder, more than packaging's ``MAX_FILES``): then nothing is said."""
    code = Path(os.path.abspath(code))
    skipped = frozenset(Path(os.path.abspath(p)) for p in skip)
    if not code.is_dir():
        return None
    out: set[str] = set()
    try:
        rules = {code: Ignores.at(code)}
    except OSError:
        return None
    for folder, dirs, names in os.walk(code):  # links to folders are not followed, as packaging refuses them
        here = Path(folder)
        top = here == code
        ignores = rules.pop(here, Ignores())
        for name in list(dirs):
            path = here / name
            if (name in EXCLUDED or (top and name in EXCLUDED_AT_TOP) or path in skipped
                    or ignores.ignored(path, is_dir=True)):
                dirs.remove(name)
            else:
                try:
                    rules[path] = ignores.enter(path)
                except OSError:
                    rules[path] = ignores
        prefix = "" if top else here.relative_to(code).as_posix() + "/"
        for name in names:
            path = here / name
            if (name in EXCLUDED or name.endswith(".pyc") or (top and name in EXCLUDED_AT_TOP) or path in skipped
                    or ignores.ignored(path, is_dir=False)):
                continue
            out.add(prefix + name)
            if len(out) > MAX_FILES:
                return None
    return frozenset(out)


def written_note(code: Path, before: frozenset[str] | None, skip: Iterable[Path], shown: str) -> str | None:
    """The line naming the files the job added to ``code`` (``shown``: the folder as printed),
    or None when it added none (or the listing could not tell)."""
    if before is None:
        return None
    after = listing(code, skip)
    if after is None:
        return None
    new = sorted(after - before)
    if not new:
        return None
    listed = ", ".join(new[:SHOWN]) + (f" and {len(new) - SHOWN} more" if len(new) > SHOWN else "")
    tops = sorted({p.split("/")[0] + ("/" if "/" in p else "") for p in new})
    entries = " ".join(tops[:SHOWN]) + (" ..." if len(tops) > SHOWN else "")
    return (f"warning: the job wrote {len(new)} new file(s) into its code folder {shown}, which the next publish or "
            f"compile would ship: {listed}; write them under an output (pass the command an output's path), or add "
            f"them to {os.path.join(shown, '.distcompignore')} ({entries})")
