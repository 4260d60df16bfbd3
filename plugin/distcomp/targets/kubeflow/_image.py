"""``distcomp build-context``: a Docker build context for a component's image, for users who
build images rather than ship code at submit (``--code image``).

The folder holds a ``Dockerfile`` (FROM the base image; pip installs ``wheels/`` and
``requirements.txt``; the code copied to ``/opt/distcomp/code``, the working folder), distcomp's
own wheel (it is on no package index, so the image must not expect to find it there), the
component's Python requirements (its conda file's ``pip:`` list, its code folder's
``requirements.txt``), the code as a publish takes it (no ``.git``, ``.venv``, caches, ``.env``,
``runs/``) and a ``.dockerignore`` that lets nothing else into the build. No ENTRYPOINT: the
job manifests give each replica its command.

The folder appears whole or not at all: it is written beside, then renamed into place.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Union

from ...errors import UsageError
from ...delivery.conda import CondaError, conda_pip

if TYPE_CHECKING:
    from ...spec import ComponentSpec

__all__ = ["CODE_DIR", "DEFAULT_BASE_IMAGE", "BuildContextError", "Context", "write_context"]

DEFAULT_BASE_IMAGE = "python:3.11-slim"
CODE_DIR = "/opt/distcomp/code"  # the code in the image, and its WORKDIR: a pod with no workingDir starts there
STAGE = "/tmp/distcomp"  # where pip finds the wheels and requirements.txt during the build
_COMMENT = re.compile(r"(^|\s)#.*")  # pip's rule: '#' at the start or after whitespace
_LOCAL = re.compile(r"(-e|--editable|-c|--constraint)(\s|=|\Z)|(\.|/|~|file:)")


class BuildContextError(UsageError, ValueError):
    """The spec, its files or the destination cannot make a build context."""


@dataclass(frozen=True)
class Context:
    """What ``write_context`` wrote: paths are relative to ``path``."""

    path: Path
    component: str  # name@version
    base_image: str
    wheel: str | None  # wheels/distcomp-VERSION-py3-none-any.whl, unless left out
    wheel_source: str | None  # how the wheel was made
    requirements: tuple[str, ...]
    requirement_sources: tuple[str, ...]  # where they came from
    code_files: tuple[str, ...]  # under code/
    notes: tuple[str, ...]  # what the user should know (what was not used, what is missing)

    @property
    def files(self) -> tuple[str, ...]:
        return ("Dockerfile", ".dockerignore", "requirements.txt", *((self.wheel,) if self.wheel else ()),
                *(f"code/{rel}" for rel in self.code_files))


def write_context(spec: Union["ComponentSpec", str, "os.PathLike[str]"], dest: "str | os.PathLike[str]",
                  base_image: str | None = None, distcomp: bool = True, *, force: bool = False,
                  spec_arg: str | None = None) -> Context:
    """Write ``spec``'s build context into the folder ``dest`` (new or empty; ``force``: replace
    what is there). ``base_image``: default the spec's environment image, else python:3.11-slim.
    ``distcomp``: include distcomp's wheel (the KFP step runs distcomp; the training pods of a
    Kubeflow job do not). ``spec_arg``: how the Dockerfile's comment names the spec (default its
    file)."""
    from .._spec import resolve_spec

    spec = resolve_spec(spec, BuildContextError)[0]
    if spec.source is None:
        raise BuildContextError(f"{spec.ref}: a build context copies the spec's code folder; load the spec from its "
                                "file")
    target = Path(os.path.abspath(dest))
    _check_dest(target, spec, force)
    if not spec.code.is_dir():
        raise BuildContextError(f"{spec.source}: its code folder {spec.code} does not exist")
    code = _code_files(spec, target)
    base, notes = _base_image(spec, base_image)
    requirements, sources, more = _requirements(spec)
    notes += more
    if not requirements:
        notes.append("requirements.txt is empty (no conda pip: list, no requirements.txt in the code folder): the "
                     f"base image {base} must hold what the code imports, or add it to requirements.txt")
    from ...base.files import mark_folder

    tmp = target.parent / f".{target.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp"
    try:
        tmp.mkdir(parents=True)
    except OSError as exc:
        raise BuildContextError(f"cannot write the build context beside {target}: {exc.strerror or exc}") from None
    try:
        wheel = how = None
        if distcomp:
            from ...delivery.wheel import distcomp_wheel

            path, how = distcomp_wheel(tmp / "wheels")
            wheel = f"wheels/{path.name}"
        for rel, source in code.items():
            out = tmp / "code" / rel
            out.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, out)
            os.chmod(out, 0o755 if os.stat(source).st_mode & 0o100 else 0o644)
        context = Context(target, spec.ref, base, wheel, how, tuple(requirements), tuple(sources),
                          tuple(sorted(code)), tuple(notes))
        (tmp / "requirements.txt").write_text(_requirements_text(context), encoding="utf-8")
        (tmp / "Dockerfile").write_text(dockerfile(context, spec_arg or str(spec.source)), encoding="utf-8")
        (tmp / ".dockerignore").write_text(DOCKERIGNORE, encoding="utf-8")
        mark_folder(tmp, "distcomp build-context")  # what --force may replace (not sent: .dockerignore)
        _swap(tmp, target)
    except OSError as exc:  # a full disk, a folder it may not write
        shutil.rmtree(tmp, ignore_errors=True)
        raise BuildContextError(f"cannot write the build context {target}: {exc.strerror or exc}"
                                f"{f' ({exc.filename})' if exc.filename else ''}") from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return context


def _check_dest(dest: Path, spec: "ComponentSpec", force: bool) -> None:
    assert spec.source is not None
    if dest.exists() and not dest.is_dir():
        raise BuildContextError(f"{dest} is a file: give a folder for the build context")
    real = dest.resolve()
    if spec.code.resolve().is_relative_to(real) or spec.source.resolve().is_relative_to(real):
        raise BuildContextError(f"{dest} holds the component's spec or code: give a folder of its own for the build "
                                "context")
    from ...core.owned import folder_problem

    why = folder_problem(dest, spec.code, force)  # never a system folder or a registry; --force: only a context
    if why:
        raise BuildContextError(f"{dest} {why}")
    if dest.is_dir() and any(dest.iterdir()) and not force:
        raise BuildContextError(f"{dest} is not empty: give a new or empty folder, or --force to replace it")


def _swap(tmp: Path, dest: Path) -> None:
    """Put ``tmp`` where ``dest`` is; what was there goes only once the new folder is in place,
    and only if distcomp made it (its marker, checked again just before it is moved)."""
    from ...base.files import swap_folder

    swap_folder(tmp, dest, marked_only=True)


def _code_files(spec: "ComponentSpec", dest: Path) -> dict[str, Path]:
    """The code folder's files as a publish takes them (relative path -> file); a context
    written inside the code folder is not part of it."""
    from ...registry._records import RegistryError
    from ...registry._snapshot import plan

    try:
        snap = plan(spec, skip=[dest])
    except RegistryError as exc:
        raise BuildContextError(f"the code folder cannot be copied: {exc}") from None
    top = f"{snap.code}/" if snap.code not in ("", ".") else ""
    return {rel[len(top):]: path for rel, path in snap.files.items() if rel.startswith(top)}


def _base_image(spec: "ComponentSpec", given: str | None) -> tuple[str, list[str]]:
    env = spec.environment
    notes: list[str] = []
    if given is not None:
        if not given or any(c.isspace() for c in given) or given.startswith("-"):
            raise BuildContextError(f"--base-image {given!r}: give an image reference such as REGISTRY/NAME:TAG")
        image = given
    elif env is not None and env.image:
        image = env.image
    else:
        image = DEFAULT_BASE_IMAGE
        named = env.reference or env.name if env is not None else None
        notes.append(f"the spec's environment {named!r} is no image (an Azure ML environment): FROM {image}; pass "
                     "--base-image for an image with its packages" if named else
                     f"the spec names no image: FROM {image} (--base-image to choose one)")
    if env is not None and env.build:
        dockerfile = env.build.get("dockerfile_path")
        notes.append(f"the spec's environment builds an image from the Docker context {env.build['path']!r}"
                     f"{f' ({dockerfile})' if dockerfile else ''}; it is not used here: build that image and pass it "
                     "as --base-image, so this image adds the code and distcomp to it")
    return image, notes


def _requirements(spec: "ComponentSpec") -> tuple[list[str], list[str], list[str]]:
    """The Python requirements (in order, each once), where they came from, and notes."""
    assert spec.source is not None
    found: dict[str, None] = {}
    sources: list[str] = []
    notes: list[str] = []
    try:
        conda = conda_pip(spec)
    except CondaError as exc:
        raise BuildContextError(str(exc)) from None
    notes += [n.replace("are not installed", "are not in requirements.txt") for n in conda.notes]
    found.update(dict.fromkeys(conda.pip))
    if conda.pip:
        sources.append(f"{conda.where} (pip:)")
    if conda.others:
        notes.append(f"{conda.where} also asks conda for {', '.join(conda.others)}: pip does not install those; use "
                     "a base image that has them (--base-image), or add their pip names to requirements.txt")
    file = spec.code / "requirements.txt"
    if file.is_file():
        lines = _read(file, spec.code, set(), notes)
        found.update(dict.fromkeys(lines))
        sources.append("requirements.txt in the code folder")
    return list(found), sources, notes


def _read(file: Path, code: Path, seen: set[Path], notes: list[str]) -> list[str]:
    """A requirements file's lines, ``-r FILE`` read in place; what names a local file (``-e .``,
    ``./pkg``, ``-c FILE``) is left out with a note: the image's pip sees requirements.txt alone."""
    seen.add(file.resolve())
    out: list[str] = []
    rel = os.path.relpath(file, code)
    for n, raw in enumerate(file.read_text(encoding="utf-8-sig").splitlines(), 1):
        line = _COMMENT.sub("", raw).strip()
        if not line:
            continue
        include = re.match(r"(-r|--requirement)(?:\s+|=)(\S+)\Z", line)
        if include:
            inner = file.parent / include.group(2)
            if not inner.is_file():
                notes.append(f"{rel}:{n}: {line!r}: no such file; left out")
            elif inner.resolve() not in seen:
                out += _read(inner, code, seen, notes)
        elif _LOCAL.match(line):
            notes.append(f"{rel}:{n}: {line!r} names a local file, which the image's pip cannot see; left out (put "
                         "its wheel in wheels/ and its name in requirements.txt)")
        else:
            out.append(line)
    return out


def _requirements_text(context: Context) -> str:
    if not context.requirements:
        return (f"# {context.component} names no Python requirements (no conda pip: list, no requirements.txt in its "
                "code folder).\n# Add what its code imports, one requirement a line, or use a base image that has "
                "it.\n")
    head = [f"# The Python requirements of {context.component}, from:"]
    head += [f"#   {source}" for source in context.requirement_sources]
    return "\n".join([*head, *context.requirements]) + "\n"


def _label(value: str) -> str:
    return json.dumps(value)  # a double-quoted string, escaped as a Dockerfile reads it


def dockerfile(context: Context, spec_arg: str) -> str:
    """The Dockerfile's text for ``context``."""
    from ... import __version__

    name, _, version = context.component.partition("@")
    lines = [
        f"# The image of {context.component}, written by `distcomp build-context` (distcomp {__version__}).",
        "#",
        "# Build it from this folder and push it where the cluster pulls images from:",
        "#   docker build -t REGISTRY/NAME:TAG .",
        "#   docker push REGISTRY/NAME:TAG",
        "# Then compile (or submit) the job to run on it, its code baked in:",
        f"#   distcomp compile {spec_arg} --target kubeflow --image REGISTRY/NAME:TAG --code image",
        "#",
    ]
    if context.wheel:
        lines += [
            "# distcomp is installed from wheels/ (it is on no package index); its dependencies and",
            "# requirements.txt come from the index pip is configured with. distcomp needs Python >= 3.11.",
        ]
    else:
        lines.append("# requirements.txt comes from the index pip is configured with; distcomp is left out.")
    lines += [
        f"# The code is in {CODE_DIR}, the working folder. No ENTRYPOINT: the job manifests give",
        "# each replica its command.",
        f"FROM {context.base_image}",
        f"LABEL io.distcomp.component={_label(context.component)} org.opencontainers.image.title={_label(name)}"
        + (f" org.opencontainers.image.version={_label(version)}" if version else ""),
    ]
    pip = "python -m pip install --no-cache-dir --disable-pip-version-check"
    if context.wheel:
        lines += [f"COPY wheels/ {STAGE}/wheels/", f"COPY requirements.txt {STAGE}/requirements.txt",
                  f"RUN {pip} --find-links {STAGE}/wheels {STAGE}/wheels/*.whl \\",
                  f"        -r {STAGE}/requirements.txt"]
    elif context.requirements:
        lines += [f"COPY requirements.txt {STAGE}/requirements.txt", f"RUN {pip} -r {STAGE}/requirements.txt"]
    lines += [f"COPY code/ {CODE_DIR}/", f"WORKDIR {CODE_DIR}"]
    return "\n".join(lines) + "\n"


# anything added to the folder later stays out of the build too
DOCKERIGNORE = """\
# Only what the Dockerfile copies is sent to the builder.
*
!Dockerfile
!wheels/*.whl
!requirements.txt
!code
**/__pycache__
**/*.pyc
"""
