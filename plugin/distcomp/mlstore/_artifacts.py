"""Artifacts of a run stored on this machine's filesystem are copied in place, as MLflow's
LocalArtifactRepository would; other artifact stores go through MLflow."""

from __future__ import annotations

import shutil
from pathlib import Path, PurePosixPath
from typing import Sequence
from urllib.parse import unquote, urlsplit

from ._records import TrackingError


def local_root(artifact_uri: str) -> Path | None:
    """The folder of a local artifact URI (``/abs/path`` or ``file:///abs/path``), else None."""
    parts = urlsplit(artifact_uri)
    if parts.scheme == "" and artifact_uri.startswith("/"):
        return Path(artifact_uri)
    if parts.scheme == "file" and parts.netloc in ("", "localhost"):
        return Path(unquote(parts.path))
    return None


def safe_artifact_path(path: str) -> PurePosixPath:
    relative = PurePosixPath(path)
    if relative.is_absolute() or ".." in relative.parts or not relative.parts:
        raise TrackingError(f"artifact path {path!r} must be relative and stay inside the run")
    return relative


def copy_files(root: Path, files: Sequence[tuple[Path, str]]) -> None:
    for source, path in files:
        target = root.joinpath(*safe_artifact_path(path).parts)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)


def upload_with_mlflow(uri: str, run_id: str, files: Sequence[tuple[Path, str]]) -> None:
    from ._mlflow import mlflow_store

    mlflow_store(uri).upload_files(run_id, files)
