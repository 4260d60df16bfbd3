"""The files of a spec's code folder that travel with a job: what a publish to the registry
takes (no .git, .venv, caches, .env, runs/, nor what .gitignore and .distcompignore leave out),
keyed by their path inside the code folder."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import UsageError

if TYPE_CHECKING:
    from ..spec import ComponentSpec


def code_files(spec: "ComponentSpec", error: type[UsageError] = UsageError) -> dict[str, Path]:
    """Relative path in the code folder -> file; a folder that cannot be shipped raises ``error``.
    A spec with no file (a function component's, one made in memory) ships its code folder alone."""
    from ..registry._records import RegistryError

    if spec.source is None:
        return folder_files(spec.code, error=error)
    from ..registry._snapshot import plan

    try:
        snap = plan(spec)
    except RegistryError as exc:
        raise error(f"the code folder cannot be shipped: {exc}") from None
    top = f"{snap.code}/" if snap.code not in ("", ".") else ""
    return {rel[len(top):]: path for rel, path in snap.files.items() if rel.startswith(top)}


def folder_files(folder: Path, skip: "tuple[Path, ...]" = (), error: type[UsageError] = UsageError) -> dict[str, Path]:
    """The same rules for a code folder with no spec file (a function component's project):
    relative POSIX path -> file; folders in ``skip`` are left out; a folder that cannot be
    shipped raises ``error``."""
    from ..base.codefolder import CodeFolderError
    from ..base.codefolder import folder_files as files

    try:
        return files(folder, skip)
    except CodeFolderError as exc:
        raise error(f"the code folder cannot be shipped: {exc}") from None
