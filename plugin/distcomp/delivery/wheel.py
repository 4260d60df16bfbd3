"""distcomp's own wheel, for an image: distcomp is on no package index, so an image that needs
it (the KFP step's) installs it from a wheel made here, from the distcomp that is running.

Two ways, neither touching the network:

- installed from a wheel (``pip install distcomp-*.whl``, or from a source folder): the files
  its ``RECORD`` lists are packed again as a wheel (``installed_wheel``, which does this for
  any installed distribution);
- installed editable (``pip install -e SOURCE``, as in a checkout): ``pip wheel --no-deps
  --no-build-isolation --no-index`` on a copy of the source tree's build files and package
  (the build writes ``build/`` and ``*.egg-info`` where it runs: never into the user's tree).

Neither (distcomp on ``PYTHONPATH`` only, an editable install whose source is gone, no
setuptools for the build): ``WheelError`` says so and how to go on (``--no-distcomp``).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from importlib import metadata
from pathlib import Path
from urllib.parse import unquote, urlparse

from ..errors import UsageError

__all__ = ["WheelError", "distcomp_wheel", "installed_wheel"]

PACKAGE = Path(__file__).resolve().parents[1]  # the distcomp package that is running
# dist-info files that describe one installation, not the distribution
_INSTALL_ONLY = frozenset({"RECORD", "INSTALLER", "REQUESTED", "direct_url.json"})
# what a setuptools build reads from the source tree's top, besides the package itself
_BUILD_FILES = re.compile(r"(pyproject\.toml|setup\.py|setup\.cfg|MANIFEST\.in|(README|LICEN[CS]E|COPYING|NOTICE)"
                          r"([.-].*)?)\Z", re.IGNORECASE)
_DATE = (1980, 1, 1, 0, 0, 0)  # zip's earliest time: the same files give the same wheel


class WheelError(UsageError, RuntimeError):
    """No wheel of distcomp can be made from what is installed here."""


def distcomp_wheel(folder: Path) -> tuple[Path, str]:
    """distcomp's wheel, written into ``folder``; and how it was made (for the user)."""
    how = "pass --no-distcomp and install distcomp in the image yourself (from a wheel of its source tree)"
    try:
        dist = metadata.distribution("distcomp")
    except metadata.PackageNotFoundError:
        raise WheelError(f"cannot make distcomp's wheel: distcomp runs from {PACKAGE} without being installed (no "
                         f"distcomp .dist-info on sys.path): install it (pip install -e SOURCE, or pip install a "
                         f"wheel), or {how}") from None
    source = _editable_source(dist)
    if source is not None:
        return _build(source, folder, how), f"built offline from the source tree {source}"
    if (direct := _editable(dist)) is not None:
        raise WheelError(f"cannot make distcomp's wheel: it is installed editable from {direct.get('url')}, which is "
                         f"not a folder on this machine; {how}")
    installed = Path(str(dist.locate_file("distcomp/__init__.py")))
    if not installed.is_file() or installed.resolve().parent != PACKAGE:
        raise WheelError(f"cannot make distcomp's wheel: the distcomp running ({PACKAGE}) is not the one installed "
                         f"({installed.parent}), and no source tree is known for it; {how}")
    if dist.read_text("RECORD") is None:  # e.g. a checkout's *.egg-info found through PYTHONPATH
        raise WheelError(f"cannot make distcomp's wheel: the distcomp running ({PACKAGE}) was not installed by pip "
                         "(no RECORD of its files) and no source tree is recorded for it: install it (pip install -e "
                         f"SOURCE, or pip install a wheel), or {how}")
    return installed_wheel(dist, folder), f"packed from the installed files of distcomp {dist.version}"


def _editable(dist: metadata.Distribution) -> dict[str, object] | None:
    """PEP 610's direct_url.json of an editable install, else None."""
    try:
        direct = json.loads(dist.read_text("direct_url.json") or "{}")
    except json.JSONDecodeError:
        return None
    editable = isinstance(direct, dict) and isinstance(direct.get("dir_info"), dict) and direct["dir_info"].get("editable")
    return direct if editable else None


def _editable_source(dist: metadata.Distribution) -> Path | None:
    """The source tree of an editable install, if it holds the running package."""
    direct = _editable(dist)
    url = urlparse(str((direct or {}).get("url", "")))
    if direct is None or url.scheme != "file":
        return None
    source = Path(unquote(url.path))
    if not PACKAGE.is_relative_to(source.resolve()):
        raise WheelError(f"cannot make distcomp's wheel: distcomp is installed editable from {source}, but the "
                         f"distcomp running is {PACKAGE}; install it again (pip install -e SOURCE) or pass "
                         "--no-distcomp and install distcomp in the image yourself")
    return source


def _build(source: Path, folder: Path, how: str) -> Path:
    """``pip wheel`` of a copy of ``source``'s build files and the running package."""
    if not (source / "pyproject.toml").is_file() and not (source / "setup.py").is_file():
        raise WheelError(f"cannot make distcomp's wheel: its source tree {source} has no pyproject.toml; {how}")
    with tempfile.TemporaryDirectory(prefix="distcomp-wheel-") as tmp:
        tree = Path(tmp) / "src"
        tree.mkdir()
        for entry in source.iterdir():
            if entry.is_file() and _BUILD_FILES.match(entry.name):
                shutil.copy2(entry, tree / entry.name)
        rel = PACKAGE.relative_to(source.resolve())
        shutil.copytree(PACKAGE, tree / rel, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        out = Path(tmp) / "out"
        proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
                               "--quiet", "--wheel-dir", str(out), str(tree)],
                              capture_output=True, text=True, timeout=600)
        wheels = sorted(out.glob("distcomp-*.whl")) if proc.returncode == 0 else []
        if len(wheels) != 1:
            last = next((line.strip() for line in reversed((proc.stderr or proc.stdout).splitlines())
                         if line.strip()), f"exit {proc.returncode}")
            raise WheelError(f"cannot make distcomp's wheel: pip wheel of its source tree {source} failed ({last}); "
                             f"this Python needs pip, setuptools>=77 and wheel to build it offline; or {how}")
        folder.mkdir(parents=True, exist_ok=True)
        return Path(shutil.copy2(wheels[0], folder / wheels[0].name))


def _tags(wheel_text: str) -> str:
    """The compressed tag set of a WHEEL file's ``Tag:`` lines (``py3-none-any``,
    ``cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64``)."""
    tags = [line.partition(":")[2].strip().split("-") for line in wheel_text.splitlines() if line.startswith("Tag:")]
    tags = [t for t in tags if len(t) == 3]
    if not tags:
        return "py3-none-any"
    return "-".join(".".join(dict.fromkeys(t[i] for t in tags)) for i in range(3))


def installed_wheel(dist: "metadata.Distribution | str", folder: Path) -> Path:
    """The installed distribution ``dist`` packed again as a wheel in ``folder``, from the files
    its RECORD lists in its install folder (scripts and data installed elsewhere are left out:
    the installer makes the scripts again from entry_points.txt). Reproducible: sorted entries,
    fixed times."""
    if isinstance(dist, str):
        dist = metadata.distribution(dist)
    name, version = dist.metadata["Name"], dist.version
    if _editable(dist):
        raise WheelError(f"cannot pack {name} {version}: it is installed editable, so its files are its source "
                         "tree's: build its wheel there (pip wheel --no-deps SOURCE)")
    base = Path(str(dist.locate_file(""))).resolve()
    info = next((f for f in dist.files or () if f.parts[0].endswith(".dist-info") and f.name == "METADATA"), None)
    if info is None:
        raise WheelError(f"cannot pack {name} {version}: its RECORD lists no .dist-info/METADATA")
    info_dir = info.parts[0]
    files: dict[str, Path] = {}
    for f in dist.files or ():
        path = Path(str(dist.locate_file(f))).resolve()
        rel = f.as_posix()
        if (".." in f.parts or not path.is_relative_to(base) or "__pycache__" in f.parts or rel.endswith(".pyc")
                or (f.parts[0] == info_dir and f.name in _INSTALL_ONLY) or not path.is_file()):
            continue
        files[rel] = path
    if not any(f.split("/")[0] != info_dir for f in files):
        raise WheelError(f"cannot pack {name} {version}: its RECORD lists no files of its own in {base} (an editable "
                         "install: build its wheel from its source tree)")
    wheel_text = dist.read_text("WHEEL") or ""
    target = folder / f"{re.sub(r'[-_.]+', '_', name).lower()}-{version}-{_tags(wheel_text)}.whl"
    folder.mkdir(parents=True, exist_ok=True)
    record: list[str] = []
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as zf:
        # the .dist-info folder last, as the wheel format recommends
        for rel in sorted(files, key=lambda r: (r.split("/")[0] == info_dir, r)):
            data = files[rel].read_bytes()
            entry = zipfile.ZipInfo(rel, _DATE)
            entry.external_attr = (0o755 if os.stat(files[rel]).st_mode & 0o100 else 0o644) << 16
            entry.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(entry, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            record.append(f"{rel},sha256={digest},{len(data)}")
        record.append(f"{info_dir}/RECORD,,")
        entry = zipfile.ZipInfo(f"{info_dir}/RECORD", _DATE)
        entry.external_attr = 0o644 << 16
        entry.compress_type = zipfile.ZIP_DEFLATED
        zf.writestr(entry, "\n".join(record) + "\n")
    return target
