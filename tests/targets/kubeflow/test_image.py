"""``distcomp build-context``: the Dockerfile parses and copies only what the context holds;
the requirements come from the conda file and the code folder; and, with no Docker engine
here, the Dockerfile's steps run for real with a clean virtualenv standing in for the base
image: distcomp installs from the context's own wheel (no index) and works there."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import pytest

import distcomp
from distcomp.errors import UsageError
from distcomp.targets.kubeflow._image import CODE_DIR, DEFAULT_BASE_IMAGE, Context, write_context
from distcomp.delivery.wheel import installed_wheel
from tests.conftest import REPO

EXAMPLE = REPO / "examples" / "pytorch-ddp"
WHEEL = f"wheels/distcomp-{distcomp.__version__}-py3-none-any.whl"
INSTRUCTIONS = {"FROM", "RUN", "CMD", "LABEL", "MAINTAINER", "EXPOSE", "ENV", "ADD", "COPY", "ENTRYPOINT", "VOLUME",
                "USER", "WORKDIR", "ARG", "ONBUILD", "STOPSIGNAL", "HEALTHCHECK", "SHELL"}


def instructions(text: str) -> list[tuple[str, str]]:
    """A Dockerfile's instructions as the builder reads them: comments and blank lines skipped,
    ``\\`` continuations joined; every instruction must be a known one, in upper case."""
    out: list[tuple[str, str]] = []
    pending = ""
    for n, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("#") or (not pending and not line.strip()):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        word, _, args = (pending + line).strip().partition(" ")
        pending = ""
        assert word in INSTRUCTIONS, f"line {n}: {word!r} is no Dockerfile instruction"
        assert args.strip(), f"line {n}: {word} without arguments"
        out.append((word, " ".join(args.split())))
    assert not pending, "the last line continues into nothing"
    return out


def _pattern(text: str) -> re.Pattern[str]:
    """A .dockerignore pattern as the builder matches it (Go's filepath.Match, plus ``**``)."""
    out, i = "", 0
    while i < len(text):
        if text.startswith("**/", i):
            out, i = out + "(.*/)?", i + 3
        elif text.startswith("**", i):
            out, i = out + ".*", i + 2
        else:
            out, i = out + {"*": "[^/]*", "?": "[^/]"}.get(text[i], re.escape(text[i])), i + 1
    return re.compile(out)


def ignored(path: str, dockerignore: str) -> bool:
    """Whether the builder leaves ``path`` out: the last pattern matching it or a folder above it decides."""
    result = False
    parts = path.split("/")
    for line in dockerignore.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        negated = line.startswith("!")
        rx = _pattern(line.lstrip("!").strip("/"))
        if any(rx.fullmatch("/".join(parts[:i])) for i in range(1, len(parts) + 1)):
            result = not negated
    return result


def tree(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def check_dockerfile(ctx: Context) -> list[tuple[str, str]]:
    """The Dockerfile is valid and copies only what the context holds and sends."""
    steps = instructions((ctx.path / "Dockerfile").read_text())
    assert steps[0] == ("FROM", ctx.base_image)
    assert not {"ENTRYPOINT", "CMD"} & {word for word, _ in steps}
    assert steps[-1] == ("WORKDIR", CODE_DIR)
    assert ("COPY", f"code/ {CODE_DIR}/") in steps
    label = next(args for word, args in steps if word == "LABEL")
    assert f'io.distcomp.component="{ctx.component}"' in label
    dockerignore = (ctx.path / ".dockerignore").read_text()
    sent = [f for f in ctx.files if not ignored(f, dockerignore)]
    assert sent == [f for f in ctx.files if f != ".dockerignore"]
    for word, args in steps:
        if word == "COPY":
            source = ctx.path / args.split()[0]
            assert source.exists(), args
            assert any(f == args.split()[0] or f.startswith(args.split()[0]) for f in sent), args
    for junk in ("big-data.tar", "code/__pycache__/train.cpython-311.pyc", "wheels/notes.txt", ".git/HEAD"):
        assert ignored(junk, dockerignore), junk
    return steps


@pytest.mark.slow
def test_the_example_s_context_holds_the_dockerfile_wheel_requirements_and_code(tmp_path: Path) -> None:
    ctx = write_context(EXAMPLE, tmp_path / "ctx")
    assert ctx.component == "pytorch-ddp-example@0.1.0"
    assert ctx.base_image == "python:3.11-slim"  # the spec's environment image
    assert ctx.wheel == WHEEL
    assert ctx.wheel_source == f"built offline from the source tree {REPO}"
    assert ctx.code_files == ("component.yaml", "train.py")
    assert sorted(tree(ctx.path)) == sorted([*ctx.files, ".distcomp-made"])  # the marker --force looks for
    assert tree(ctx.path / "code") == {name: (EXAMPLE / name).read_bytes() for name in ctx.code_files}
    assert (ctx.path / "requirements.txt").read_text().startswith("# pytorch-ddp-example@0.1.0 names no Python "
                                                                  "requirements")
    assert ctx.notes == ("requirements.txt is empty (no conda pip: list, no requirements.txt in the code folder): "
                         "the base image python:3.11-slim must hold what the code imports, or add it to "
                         "requirements.txt",)
    steps = check_dockerfile(ctx)
    assert [w for w, _ in steps] == ["FROM", "LABEL", "COPY", "COPY", "RUN", "COPY", "WORKDIR"]
    run = next(args for word, args in steps if word == "RUN")
    assert run == ("python -m pip install --no-cache-dir --disable-pip-version-check --find-links /tmp/distcomp/wheels "
                   "/tmp/distcomp/wheels/*.whl -r /tmp/distcomp/requirements.txt")
    text = (ctx.path / "Dockerfile").read_text()
    assert f"#   distcomp compile {EXAMPLE / 'component.yaml'} --target kubeflow --image REGISTRY/NAME:TAG --code image\n" in text
    # the wheel is distcomp as it runs here: every module, its data files, its entry points, a RECORD that holds
    with zipfile.ZipFile(ctx.path / WHEEL) as zf:
        names = set(zf.namelist())
        info = f"distcomp-{distcomp.__version__}.dist-info"
        package = Path(distcomp.__file__).parent
        here = {p.relative_to(package.parent).as_posix() for p in package.rglob("*")
                if p.is_file() and "__pycache__" not in p.parts and p.suffix in (".py", ".json", ".sh", ".typed")}
        assert here <= names
        assert f"Version: {distcomp.__version__}" in zf.read(f"{info}/METADATA").decode().splitlines()
        assert "distcomp = distcomp.cli:main" in zf.read(f"{info}/entry_points.txt").decode()
        assert not any(n.startswith("distcomp.egg-info") or "__pycache__" in n for n in names)


def test_requirements_come_from_the_conda_pip_list_and_the_code_folder(tmp_path: Path) -> None:
    src = tmp_path / "comp"
    (src / "src").mkdir(parents=True)
    (src / "component.yaml").write_text(
        "name: reqs\nversion: 2.0.0\ntype: DistributedComponent\nlauncher:\n  type: mpi\n"
        "  additional_arguments: python train.py\ncode: src\nenvironment:\n  conda_file: env.yml\n"
        "  image: registry.example/base:1\n")
    (src / "env.yml").write_text("name: x\ndependencies:\n  - python=3.11\n  - pip\n  - numpy=1.26\n"
                                 "  - pip:\n      - mlflow>=3.7\n      - torch==2.13.0\n")
    (src / "src" / "train.py").write_text("print('hi')\n")
    (src / "src" / "base.txt").write_text("pandas  # data\ntorch==2.13.0\n")
    (src / "src" / "requirements.txt").write_text("# pinned\n-r base.txt\n\nscikit-learn>=1.4\n-e .\n"
                                                  "--extra-index-url https://pkgs.example/simple\n")
    ctx = write_context(src / "component.yaml", tmp_path / "ctx", distcomp=False)
    assert ctx.requirements == ("mlflow>=3.7", "torch==2.13.0", "pandas", "scikit-learn>=1.4",
                                "--extra-index-url https://pkgs.example/simple")
    assert (ctx.path / "requirements.txt").read_text() == (
        "# The Python requirements of reqs@2.0.0, from:\n#   the conda file env.yml (pip:)\n"
        "#   requirements.txt in the code folder\nmlflow>=3.7\ntorch==2.13.0\npandas\nscikit-learn>=1.4\n"
        "--extra-index-url https://pkgs.example/simple\n")
    assert ctx.notes == (
        "the conda file env.yml also asks conda for numpy=1.26: pip does not install those; use a base image that "
        "has them (--base-image), or add their pip names to requirements.txt",
        "requirements.txt:5: '-e .' names a local file, which the image's pip cannot see; left out (put its wheel "
        "in wheels/ and its name in requirements.txt)")
    assert ctx.base_image == "registry.example/base:1"
    assert ctx.code_files == ("base.txt", "requirements.txt", "train.py")
    assert ctx.wheel is None and not (ctx.path / "wheels").exists()
    steps = check_dockerfile(ctx)
    assert ("RUN", "python -m pip install --no-cache-dir --disable-pip-version-check -r "
                   "/tmp/distcomp/requirements.txt") in steps
    assert not any("wheels" in args for _, args in steps)


def test_the_shipped_mpi_component_s_inline_conda_gives_its_pip_packages() -> None:
    from distcomp.targets.kubeflow._image import _requirements

    spec = distcomp.load(REPO / "components" / "mpi-allreduce-bench")
    requirements, sources, notes = _requirements(spec)
    assert (requirements, sources) == (["mpi4py"], ["the spec's conda environment (pip:)"])
    assert notes == ["the spec's conda environment also asks conda for numpy, matplotlib-base: pip does not "
                     "install those; use a base image that has them (--base-image), or add their pip names to "
                     "requirements.txt"]


def test_base_image_flag_an_azure_environment_and_a_build_context(tmp_path: Path) -> None:
    (tmp_path / "spec").mkdir()
    (tmp_path / "spec" / "train.py").write_text("")
    command = "type: DistributedComponent\nlauncher: {type: mpi, additional_arguments: python train.py}\n"

    def write_spec(text: str, name: str) -> Path:
        (tmp_path / "spec" / name).write_text(text)
        return tmp_path / "spec" / name

    azure = write_spec(f"name: az\n{command}environment: {{name: AzureML-Minimal}}\n", "az.yaml")
    ctx = write_context(azure, tmp_path / "a", distcomp=False)
    assert ctx.base_image == DEFAULT_BASE_IMAGE
    assert ctx.notes[0] == ("the spec's environment 'AzureML-Minimal' is no image (an Azure ML environment): FROM "
                            "python:3.11-slim; pass --base-image for an image with its packages")
    built = write_spec(f"name: built\n{command}environment:\n  build: {{path: docker, dockerfile_path: Dockerfile}}\n",
                       "built.yaml")
    ctx = write_context(built, tmp_path / "b", base_image="registry.example/mine:2", distcomp=False)
    assert ctx.base_image == "registry.example/mine:2"
    assert ctx.notes[0] == ("the spec's environment builds an image from the Docker context 'docker' (Dockerfile); it "
                            "is not used here: build that image and pass it as --base-image, so this image adds the "
                            "code and distcomp to it")
    assert instructions((ctx.path / "Dockerfile").read_text())[0] == ("FROM", "registry.example/mine:2")
    with pytest.raises(UsageError, match=r"--base-image 'bad image': give an image reference such as "
                                         r"REGISTRY/NAME:TAG\Z"):
        write_context(built, tmp_path / "c", base_image="bad image", distcomp=False)
    assert not (tmp_path / "c").exists()


def distcomp_cli(*args: str, python: str = sys.executable, env: dict[str, str] | None = None,
                 cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([python, "-m", "distcomp", *args], capture_output=True, text=True, env=env, cwd=cwd,
                          timeout=120)


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith((".tmp", ".old")))


@pytest.mark.slow
def test_cli_writes_the_context_and_refuses_what_it_must(tmp_path: Path) -> None:
    dest = tmp_path / "ctx"
    proc = distcomp_cli("build-context", str(EXAMPLE), str(dest), "--no-distcomp", "--base-image", "pytorch/pytorch:2")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ""
    assert proc.stderr.splitlines()[1:] == [
        f"distcomp build-context: wrote {dest}: Dockerfile (FROM pytorch/pytorch:2), requirements.txt (0 "
        "requirements), code/ (2 files)",
        f"distcomp build-context: next: docker build -t REGISTRY/NAME:TAG {dest} && docker push REGISTRY/NAME:TAG; "
        f"then distcomp compile {EXAMPLE} --target kubeflow --image REGISTRY/NAME:TAG --code image"]
    assert sorted(tree(dest)) == [".distcomp-made", ".dockerignore", "Dockerfile", "code/component.yaml", "code/train.py",
                                  "requirements.txt"]
    # nothing to install: no RUN at all
    assert [w for w, _ in instructions((dest / "Dockerfile").read_text())] == ["FROM", "LABEL", "COPY", "WORKDIR"]

    def refused(*args: str) -> str:
        proc = distcomp_cli("build-context", *args)
        assert proc.returncode == 2 and proc.stdout == "" and "Traceback" not in proc.stderr, proc.stderr
        assert len(proc.stderr.splitlines()) == 1, proc.stderr
        return proc.stderr.strip()

    assert refused(str(EXAMPLE), str(dest)) == (f"distcomp build-context: {dest} is not empty: give a new or empty "
                                               "folder, or --force to replace it")
    assert refused(str(EXAMPLE), str(EXAMPLE.parent), "--force") == (
        f"distcomp build-context: {EXAMPLE.parent} holds the component's spec or code: give a folder of its own for "
        "the build context")
    (tmp_path / "file").write_text("")
    assert refused(str(EXAMPLE), str(tmp_path / "file")) == (f"distcomp build-context: {tmp_path / 'file'} is a file: "
                                                            "give a folder for the build context")
    assert refused(str(EXAMPLE), str(tmp_path / "file" / "ctx")) == (
        f"distcomp build-context: cannot write the build context beside {tmp_path / 'file' / 'ctx'}: Not a directory")
    assert refused(str(tmp_path / "nope.yaml"), str(tmp_path / "x")).startswith(
        f"distcomp build-context: {tmp_path / 'nope.yaml'}")
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\ntype: DistributedComponent\nlauncher: {type: mpi, additional_arguments: python t.py}\n"
                   "environment: {conda_file: missing.yml}\n")
    assert refused(str(bad), str(tmp_path / "y")) == (f"distcomp build-context: {bad}: its conda file 'missing.yml' "
                                                     f"does not exist (resolved to {tmp_path / 'missing.yml'})")
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists() and leftovers(tmp_path) == []
    # --force replaces the folder whole: what was there is gone, the new context is complete
    (dest / "stale.txt").write_text("old")
    proc = distcomp_cli("build-context", str(EXAMPLE), str(dest), "--no-distcomp", "--force")
    assert proc.returncode == 0, proc.stderr
    assert sorted(tree(dest)) == [".distcomp-made", ".dockerignore", "Dockerfile", "code/component.yaml", "code/train.py",
                                  "requirements.txt"]
    assert leftovers(tmp_path) == []


def test_a_context_inside_the_code_folder_is_not_copied_into_itself(tmp_path: Path) -> None:
    comp = tmp_path / "comp"
    shutil.copytree(EXAMPLE, comp)
    first = write_context(comp, comp / "image", distcomp=False)
    assert first.code_files == ("component.yaml", "train.py")
    again = write_context(comp, comp / "image", distcomp=False, force=True)
    assert again.code_files == ("component.yaml", "train.py")
    assert sorted(tree(comp / "image" / "code")) == ["component.yaml", "train.py"]


# --- the Dockerfile run for real: a clean virtualenv stands in for the base image -------------------------------


def pip_env(venv: Path, wheelhouse: Path) -> dict[str, str]:
    """The environment of a build with no network: this machine's pip settings out, the index
    replaced by ``wheelhouse`` (distcomp's dependencies); ``python`` is the venv's."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "PYTHON", "VIRTUAL_ENV"))}
    env.update(PATH=f"{venv / 'bin'}:{env.get('PATH', '/usr/bin:/bin')}", PIP_CONFIG_FILE=os.devnull,
               PIP_NO_INDEX="1", PIP_FIND_LINKS=str(wheelhouse), PIP_DISABLE_PIP_VERSION_CHECK="1")
    return env


def docker_build(context: Path, root: Path, env: dict[str, str]) -> Path:
    """Run the Dockerfile's COPY, RUN and WORKDIR steps with ``root`` for the image's /;
    returns the working folder."""
    workdir = root
    for word, args in instructions((context / "Dockerfile").read_text()):
        if word == "COPY":
            src, dst = args.split()
            target = root / dst.lstrip("/")
            if (context / src).is_dir():
                shutil.copytree(context / src, target, dirs_exist_ok=True)
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(context / src, target)
        elif word == "RUN":  # every absolute path is the image's
            command = re.sub(r"(?<=\s)/(?=\w)", f"{root}/", f" {args}")
            proc = subprocess.run(["/bin/sh", "-c", command], cwd=workdir, env=env, capture_output=True, text=True,
                                  timeout=300)
            assert proc.returncode == 0, proc.stdout + proc.stderr
        elif word == "WORKDIR":
            workdir = root / args.lstrip("/")
            workdir.mkdir(parents=True, exist_ok=True)
    return workdir


@dataclass(frozen=True)
class Image:
    context: Context
    venv: Path
    workdir: Path
    wheelhouse: Path
    env: dict[str, str]


@pytest.fixture(scope="module")
def image(tmp_path_factory: pytest.TempPathFactory) -> Image:
    """The example's context, built into a fresh virtualenv with no index: distcomp from the
    context's wheel, its dependencies from wheels packed from this environment's installs."""
    base = tmp_path_factory.mktemp("image")
    wheelhouse = base / "wheelhouse"
    needs = [re.split(r"[<>=!~; \[]", r, maxsplit=1)[0] for r in metadata.requires("distcomp") or ()
             if "extra ==" not in r]
    assert sorted(n.lower() for n in needs) == ["packaging", "pluggy", "pyyaml"]
    for name in needs:
        installed_wheel(name, wheelhouse)
    context = write_context(EXAMPLE, base / "ctx")
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    env = pip_env(venv, wheelhouse)
    workdir = docker_build(context.path, base / "root", env)
    return Image(context, venv, workdir, wheelhouse, env)


@pytest.mark.slow
def test_the_dockerfile_installs_a_working_distcomp_from_its_own_wheel(image: Image) -> None:
    python = str(image.venv / "bin" / "python")
    assert image.workdir == image.workdir.parents[2] / CODE_DIR.lstrip("/")
    assert tree(image.workdir) == tree(image.context.path / "code") == {
        name: (EXAMPLE / name).read_bytes() for name in ("component.yaml", "train.py")}
    proc = distcomp_cli("--version", python=python, env=image.env, cwd=image.workdir)
    assert proc.stdout == f"distcomp {distcomp.__version__}\n", proc.stderr
    where = subprocess.run([python, "-c", "import distcomp, yaml, pluggy; print(distcomp.__file__)"],
                           capture_output=True, text=True, env=image.env, cwd=image.workdir, check=True).stdout
    assert where.startswith(str(image.venv)), where  # the image's own distcomp, not this checkout's
    # distcomp and its dependencies work there: the copied spec validates from the working folder
    proc = distcomp_cli("validate", "component.yaml", python=python, env=image.env, cwd=image.workdir)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "component.yaml: ok: pytorch-ddp-example@0.1.0 (torch.distributed, 1 node x 2 processes)\n"


@pytest.mark.slow
def test_a_distcomp_installed_from_the_wheel_packs_the_same_wheel(image: Image, tmp_path: Path) -> None:
    """The other way to the wheel: from an installed (not editable) distcomp's RECORD."""
    dest = tmp_path / "again"
    proc = distcomp_cli("build-context", str(EXAMPLE), str(dest), python=str(image.venv / "bin" / "python"),
                        env=image.env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert f"{WHEEL} (packed from the installed files of distcomp {distcomp.__version__})" in proc.stderr

    def content(wheel: Path) -> dict[str, bytes]:
        with zipfile.ZipFile(wheel) as zf:
            return {n: zf.read(n) for n in zf.namelist() if not n.endswith(".dist-info/RECORD")}

    assert content(dest / WHEEL) == content(image.context.path / WHEEL)
    with zipfile.ZipFile(dest / WHEEL) as zf:
        record = zf.read(f"distcomp-{distcomp.__version__}.dist-info/RECORD").decode().splitlines()
    assert len(record) == len(zf.namelist())
    assert not any(name in "\n".join(record) for name in ("INSTALLER", "REQUESTED", "direct_url.json", "bin/"))


@pytest.mark.slow
def test_without_an_installed_distcomp_the_wheel_is_a_clear_error(image: Image, tmp_path: Path) -> None:
    """distcomp on PYTHONPATH only (a copy of the package, no .dist-info): no wheel can be made,
    nothing is written; --no-distcomp still works."""
    shutil.copytree(Path(distcomp.__file__).parent, tmp_path / "path" / "distcomp",
                    ignore=shutil.ignore_patterns("__pycache__"))
    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True, timeout=120)
    deps = tmp_path / "deps"
    for wheel in image.wheelhouse.glob("*.whl"):
        with zipfile.ZipFile(wheel) as zf:
            zf.extractall(deps)
    env = {**image.env, "PYTHONPATH": f"{tmp_path / 'path'}:{deps}"}
    python = str(bare / "bin" / "python")
    dest = tmp_path / "ctx"
    proc = distcomp_cli("build-context", str(EXAMPLE), str(dest), python=python, env=env, cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.splitlines()[-1] == (
        f"distcomp build-context: cannot make distcomp's wheel: distcomp runs from {tmp_path / 'path' / 'distcomp'} "
        "without being installed (no distcomp .dist-info on sys.path): install it (pip install -e SOURCE, or pip "
        "install a wheel), or pass --no-distcomp and install distcomp in the image yourself (from a wheel of its "
        "source tree)")
    assert not dest.exists() and leftovers(tmp_path) == []
    proc = distcomp_cli("build-context", str(EXAMPLE), str(dest), "--no-distcomp", python=python, env=env,
                        cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert not (dest / "wheels").exists() and (dest / "Dockerfile").is_file()
