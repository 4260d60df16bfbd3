"""``compile_project``: a component as a self-contained MLflow project folder.

The folder holds the spec file as written, its code folder at the same place relative to it,
an ``MLproject`` and its job record (see ``_mlproject``). It is built in a hidden sibling folder and renamed
into place, so a failure leaves no half-written project; a previous project distcomp wrote
there is replaced, anything else is left alone.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from pathlib import Path

from ...base.files import checked_copy
from ...delivery.code import code_files
from ...core.jobrecord import write_record
from .._spec import SpecLike
from ._errors import MlflowTargetError
from ._mlproject import MLPROJECT, RECORD, is_ours, mlproject_text, record

CODE = "code"  # where a code folder from outside the spec's folder goes in the project


def compile_project(spec_path: "SpecLike", out_dir: str | os.PathLike[str], *,
                    nodes: int | None = None, nproc_per_node: int | None = None) -> Path:
    """Write the MLflow project of the spec at ``spec_path`` into ``out_dir``; returns it.

    ``nodes`` / ``nproc_per_node`` are baked into the job record (the backend config of ``mlflow
    run -b distcomp`` can still override them). Raises MlflowTargetError."""
    from .._spec import resolve_spec

    spec, _ = resolve_spec(spec_path, MlflowTargetError)  # a file, a folder or a registry reference
    if spec.source is None:  # load() of a path always sets it
        raise MlflowTargetError(f"{spec_path}: not loaded from a file")
    source = spec.source.resolve()
    home, code = source.parent, spec.code.resolve()
    out = Path(out_dir).absolute().resolve()
    moved: str | None = None  # the spec's text with its code folder moved into the project
    try:
        code_rel = code.relative_to(home)
    except ValueError:
        moved = _with_code_here(source)
        if moved is None:
            raise MlflowTargetError(
                f"{source}: the code folder {code} is outside the spec's folder {home}; an MLflow project is one "
                "folder (hint: move the code under the spec's folder, or the spec next to its code)") from None
        code_rel = Path(CODE)
    if not code.is_dir():
        raise MlflowTargetError(f"{source}: the code folder {code} does not exist; the project carries it "
                                "(hint: create it, or fix `code:` in the spec)")
    if source.name in (MLPROJECT, RECORD):
        raise MlflowTargetError(f"{source}: a spec named {source.name} would be replaced by the project's own file; "
                                "rename it (e.g. component.yaml)")
    if out == home or home.is_relative_to(out):
        raise MlflowTargetError(f"{out}: holds the spec itself; write the project to another folder")
    _check_target(out)
    text = mlproject_text(spec, source.name)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent))
    except OSError as exc:
        raise MlflowTargetError(f"cannot write {out}: {exc.strerror or exc}") from None
    try:
        _copy_code(code_files(spec, MlflowTargetError), tmp / code_rel, avoid=(out, tmp))
        if moved is None:
            shutil.copyfile(source, tmp / source.name)
        else:
            (tmp / source.name).write_text(moved, encoding="utf-8")
        (tmp / MLPROJECT).write_text(text, encoding="utf-8")
        # (a code file of either name is replaced, as before). The record holds no input value:
        # readable as the project's other files are.
        write_record(tmp / RECORD, record(spec, source.name, nodes, nproc_per_node), mode=0o644)
        _move_into_place(tmp, out)
    except (OSError, shutil.Error) as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise MlflowTargetError(f"cannot write the project {out}: {exc}") from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


def _with_code_here(source: Path) -> str | None:
    """The text of a DistributedComponent spec whose ``code:`` lies outside its folder (a
    function component's spec in distcomp's cache names the project's absolute path; a user's
    may say ``../src``), with ``code: code``: the project then carries the code as ``code/``.
    None for another dialect, whose layout distcomp does not rewrite."""
    import yaml

    try:
        doc = yaml.safe_load(source.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None
    if not isinstance(doc, dict) or doc.get("type") != "DistributedComponent" or not isinstance(doc.get("code"), str):
        return None
    doc["code"] = CODE
    return yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, default_flow_style=False, width=1 << 16)


def _check_target(out: Path) -> None:
    """``out`` may be new, empty, or a project distcomp wrote before; nothing else is replaced."""
    if not out.exists():
        return
    if not out.is_dir():
        raise MlflowTargetError(f"{out} exists and is not a folder; give a folder for the MLflow project")
    if not any(out.iterdir()):
        return
    mlproject = out / MLPROJECT
    try:
        ours = mlproject.is_file() and is_ours(mlproject.read_text(encoding="utf-8", errors="replace"))
    except OSError:
        ours = False
    if not ours:
        raise MlflowTargetError(f"{out} is not empty and is not an MLflow project distcomp wrote (no {MLPROJECT} "
                                "from `distcomp compile --target mlflow` in it); it is left alone: give a new or "
                                "empty folder")


def _copy_code(files: "dict[str, Path]", dst: Path, avoid: "tuple[Path, ...]") -> None:
    """The code folder's files as every delivery ships them (``distcomp.delivery.code``: less
    caches, run leftovers and what .gitignore/.distcompignore leave out), less the project
    being written when it lies inside the code folder. Writable: a registry keeps its
    snapshots read-only, and the project is the user's to edit and replace."""
    copy = checked_copy(MlflowTargetError)
    made: set[Path] = set()
    for rel, source in files.items():
        if any(source.is_relative_to(a) for a in avoid):
            continue
        target = dst / rel
        if target.parent not in made:
            target.parent.mkdir(parents=True, exist_ok=True)
            made.add(target.parent)
        copy(str(source), str(target))
        target.chmod(target.stat().st_mode | stat.S_IWUSR)


def _move_into_place(tmp: Path, out: Path) -> None:
    """Rename the finished folder to ``out``; a previous one is moved aside first and deleted
    only once the new one is in place."""
    if not out.exists():
        tmp.rename(out)
        return
    old = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".old", dir=out.parent))
    out.rename(old / "project")
    try:
        tmp.rename(out)
    except BaseException:
        (old / "project").rename(out)
        raise
    finally:
        if out.exists():
            shutil.rmtree(old, ignore_errors=True)
