"""A registry job runs in its own copy of the stored code (``registry.working_copy``): the
copy is made in the run folder after the hash check, the ranks' folder for the whole job, and
removed when the job ends, whatever its end; what the job wrote beside its code stays there."""

from __future__ import annotations

import dataclasses
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

from ...registry import stored_version
from ...spec import ComponentSpec

WORK = "work"  # RUN_DIR/work: the copy, then what the job wrote beside its code


@contextmanager
def stored_code_copy(spec: ComponentSpec, run_dir: Path,
                     notify: Callable[[str], None] | None = None) -> Iterator[ComponentSpec]:
    """``spec`` as it is, or, when its code is stored in a registry, running in a fresh copy."""
    if stored_version(spec.code) is None:  # a cheap look first: the copy's hashing loads only for stored code
        yield spec
        return
    from ...registry import working_copy

    copy = working_copy(spec.code, run_dir / WORK)
    if copy is None:
        yield spec
        return
    try:
        yield dataclasses.replace(spec, code=copy.code)
    finally:
        kept = copy.remove()
        if kept and notify is not None:
            notify(f"the job wrote beside its code (stored in the registry, never changed): kept in {copy.folder} "
                   f"({', '.join(kept[:5])}{', ...' if len(kept) > 5 else ''})")
