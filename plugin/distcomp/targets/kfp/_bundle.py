"""What a KFP step carries: the spec and its code folder as one reproducible archive.

A lightweight KFP component ships only its function's source, so the spec and the code are
embedded in that source as a base64 tar.gz, unpacked inside the container. The code is what
every other delivery ships (``distcomp.delivery.code``: no .git, .venv, caches, .env, what a
run writes, nor what ``.gitignore`` and ``.distcompignore`` leave out). The archive is
byte-for-byte reproducible (sorted entries, zero times and owners, gzip without a
timestamp): compiling the same spec twice gives the same pipeline YAML.
"""

from __future__ import annotations

import base64
import os
from dataclasses import dataclass
from typing import Mapping

import yaml

from ...base.files import targz
from ...spec import ComponentSpec, check_text
from ._errors import KfpTargetError, ask

SPEC_FILE = "component.yaml"
CODE_DIR = "code"


@dataclass(frozen=True)
class Bundle:
    archive: str  # base64 of the tar.gz
    files: tuple[tuple[str, int], ...]  # (path in the bundle, bytes), for size messages

    def largest(self, n: int = 3) -> str:
        top = sorted(self.files, key=lambda f: -f[1])[:n]
        return ", ".join(f"{name} ({size / 1024:.0f} KiB)" for name, size in top)


def pack(spec: ComponentSpec, code_path: str | None, launchers: Mapping[str, str]) -> Bundle:
    """The spec (its ``code:`` pointed at the bundled folder, or at ``code_path`` inside the
    image) and, unless ``code_path`` is given, the code folder's files; ``launchers``: the
    table the spec was loaded with, which checks the embedded copy."""
    if spec.source is None:
        raise KfpTargetError(f"{spec.ref}: the KFP target embeds the spec file, and this spec was not loaded from "
                             "one (load it with distcomp.spec.load(PATH))")
    entries: list[tuple[str, bytes, int]] = [(SPEC_FILE, _bundled_spec(spec, code_path or CODE_DIR, launchers), 0o644)]
    if code_path is None:
        entries += _code_files(spec)
    return Bundle(_archive(entries), tuple((name, len(data)) for name, data, _ in entries))


def _bundled_spec(spec: ComponentSpec, code: str, launchers: Mapping[str, str]) -> bytes:
    """The spec file as written, but with ``code:`` where the step will find the code."""
    assert spec.source is not None
    try:
        data = yaml.safe_load(spec.source.read_text(encoding="utf-8-sig"))
    except (OSError, yaml.YAMLError) as exc:
        raise KfpTargetError(f"{spec.source}: cannot be read again to embed it: {exc}") from None
    data.pop("$schema", None)  # a path relative to the original file
    data["code"] = code
    text = yaml.safe_dump(data, sort_keys=False, allow_unicode=True)
    again = check_text(text, SPEC_FILE, spec.source.parent, launchers).spec
    if again is None or (again.inputs, again.outputs, again.command.source) != (
            spec.inputs, spec.outputs, spec.command.source):
        raise KfpTargetError(f"{spec.source}: the file no longer holds the spec that was loaded from it "
                             "(was it changed since?)")
    return text.encode("utf-8")


def _code_files(spec: ComponentSpec) -> list[tuple[str, bytes, int]]:
    from ...delivery.code import code_files

    if not spec.code.is_dir():
        raise KfpTargetError(f"the code folder {spec.code} does not exist: the step embeds it (create it, or, for code "
                             f"already inside the image, give its folder there: {ask('code_path')})")
    out = []
    for rel, path in sorted(code_files(spec, KfpTargetError).items()):
        mode = 0o755 if os.access(path, os.X_OK) else 0o644
        out.append((f"{CODE_DIR}/{rel}", path.read_bytes(), mode))
    return out


def _archive(entries: list[tuple[str, bytes, int]]) -> str:
    return base64.b64encode(targz(entries)).decode("ascii")
