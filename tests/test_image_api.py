"""``distcomp.build_context`` called directly: the record of what ``distcomp build-context``
wrote (tests/targets/kubeflow/test_image.py builds from it and runs the command)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

import distcomp
from distcomp.errors import UsageError
from tests.conftest import REPO

EXAMPLE = REPO / "examples" / "pytorch-ddp"


def test_build_context_returns_what_it_wrote(tmp_path: Path) -> None:
    context = distcomp.build_context(str(EXAMPLE), tmp_path / "ctx", base_image="pytorch/pytorch:2",
                                     include_distcomp=False)
    assert (context.path, context.base_image, context.wheel, context.requirements) == (
        tmp_path / "ctx", "pytorch/pytorch:2", None, ())
    assert context.component == distcomp.load(EXAMPLE).ref
    assert context.code_files == ("component.yaml", "train.py")
    assert sorted([*context.files, ".distcomp-made"]) == sorted(str(p.relative_to(context.path)) for p in context.path.rglob("*")
                                           if p.is_file())
    # the Dockerfile's next step names the spec as the caller did
    assert f"distcomp compile {EXAMPLE} --target kubeflow" in (context.path / "Dockerfile").read_text()
    with pytest.raises(dataclasses.FrozenInstanceError):
        context.base_image = "x"  # type: ignore[misc]


def test_a_loaded_spec_builds_too_and_a_used_folder_is_refused(tmp_path: Path) -> None:
    spec = distcomp.load(EXAMPLE / "component.yaml")
    context = distcomp.build_context(spec, tmp_path / "ctx", include_distcomp=False)
    assert context.base_image == "python:3.11-slim"  # the example names no image
    assert f"distcomp compile {spec.source} --target kubeflow" in (context.path / "Dockerfile").read_text()
    with pytest.raises(UsageError, match="is not empty: give a new or empty folder, or --force to replace it"):
        distcomp.build_context(spec, tmp_path / "ctx", include_distcomp=False)
    again = distcomp.build_context(spec, tmp_path / "ctx", include_distcomp=False, force=True)
    assert again.code_files == context.code_files
