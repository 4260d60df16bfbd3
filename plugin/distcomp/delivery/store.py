"""The submit side of the object store a job's code and outputs travel through.

The code goes up as one reproducible tar.gz named by its sha256
(``{prefix}/code/sha256-{digest}.tar.gz``), so an unchanged code folder is not uploaded again,
and a node checks what it fetched against that digest. The requests are ``fetcher``'s, the
same text the nodes run (``SOURCE``); here its ``StoreError`` becomes a ``UsageError`` that says
what to set.
"""

from __future__ import annotations

import hashlib
import os
import re
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Iterator, Mapping

from ..base.files import targz
from ..errors import UsageError
from . import fetcher
from .fetcher import StoreError

__all__ = ["SOURCE", "CodeObject", "StoreURI", "code_key", "download_tree", "pack", "upload_code"]

# What a node runs as ``python -c`` (an init container, a Slurm step): read once, it is part of the package.
SOURCE = (Path(__file__).parent / "fetcher.py").read_text(encoding="utf-8")

_BUCKET = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{1,253}[A-Za-z0-9]")
_CREDENTIALS = ("InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied", "Forbidden", "InvalidToken",
                "ExpiredToken", "TokenRefreshRequired", "AllAccessDisabled")
_REGION = ("PermanentRedirect", "AuthorizationHeaderMalformed", "IllegalLocationConstraintException")


@dataclass(frozen=True)
class StoreURI:
    """``s3://BUCKET[/PREFIX]``: where a job's objects go; ``prefix`` without slashes at its ends."""

    bucket: str
    prefix: str = ""

    @classmethod
    def parse(cls, text: str) -> StoreURI:
        form = "give s3://BUCKET or s3://BUCKET/PREFIX, e.g. s3://ml-jobs/distcomp"
        if not text.startswith("s3://"):
            raise UsageError(f"{text!r} is not an object store location: {form}")
        bucket, _, prefix = text[len("s3://"):].partition("/")
        if not _BUCKET.fullmatch(bucket) or ".." in bucket:
            raise UsageError(f"{text!r}: {bucket!r} is not a bucket name (3 to 255 letters, digits, '.', '-' "
                             f"or '_'): {form}")
        prefix = prefix.strip("/")
        if prefix and any(part in ("", ".", "..") for part in prefix.split("/")):
            raise UsageError(f"{text!r}: the prefix {prefix!r} has an empty, '.' or '..' part: {form}")
        return cls(bucket, prefix)

    def key(self, *parts: str) -> str:
        """The key of ``parts`` under the prefix."""
        return "/".join(p for p in (self.prefix, *parts) if p)

    def child(self, *parts: str) -> StoreURI:
        """The location ``parts`` below this one (e.g. a job's outputs)."""
        return StoreURI(self.bucket, self.key(*parts))

    def __str__(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}" if self.prefix else f"s3://{self.bucket}"


@dataclass(frozen=True)
class CodeObject:
    """A code archive in the store: what the init container fetches and checks."""

    bucket: str
    key: str
    sha256: str
    uploaded: bool  # False: the same archive was there already
    size: int

    @property
    def uri(self) -> str:
        return f"s3://{self.bucket}/{self.key}"


def _relative(name: str) -> str:
    """``name`` as a clean relative POSIX path, or a UsageError."""
    path = PurePosixPath(name.replace("\\", "/"))
    parts = [p for p in path.parts if p != "."]
    if not parts or path.is_absolute() or ".." in parts:
        raise UsageError(f"{name!r} cannot be a path in the code archive: give a path relative to the code "
                         "folder, without '..'")
    return "/".join(parts)


def pack(files: Mapping[str, Path]) -> bytes:
    """A reproducible tar.gz of relative path -> file: sorted entries, no times, owners or
    names, mode 0755 for an executable file else 0644, gzip without a timestamp. The same
    files give the same bytes, hence the same key in the store."""
    entries: dict[str, Path] = {}
    for name, path in files.items():
        rel = _relative(name)
        if rel in entries:
            raise UsageError(f"{name!r} and another name both mean {rel!r} in the code archive")
        entries[rel] = Path(path)
    packed = []
    for rel in sorted(entries):
        path = entries[rel]
        try:
            data, mode = path.read_bytes(), path.stat().st_mode
        except OSError as exc:
            raise UsageError(f"{path}: cannot be read to pack the code ({exc.strerror or exc})") from None
        packed.append((rel, data, 0o755 if mode & 0o111 else 0o644))
    return targz(packed)


def _hint(exc: StoreError) -> str:
    if exc.code == "NoSuchBucket":
        return "the bucket must exist: create it first (distcomp does not create buckets)"
    if exc.code in _CREDENTIALS:
        return ("set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN for temporary credentials) "
                "to a key that may read and write this bucket")
    if exc.code in _REGION:
        return "set AWS_REGION to the bucket's region"
    if exc.code == "ConnectionError":
        return ("set AWS_ENDPOINT_URL_S3 (or AWS_ENDPOINT_URL) to the store's URL, e.g. http://minio.example:9000, "
                "and check that it is up")
    if exc.code in ("Config", "Archive", "Integrity"):
        return ""
    return ("check AWS_ENDPOINT_URL_S3, AWS_REGION, AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY; the bucket must "
            "exist")


@contextmanager
def _as_usage(doing: str) -> Iterator[None]:
    try:
        yield
    except StoreError as exc:
        hint = _hint(exc)
        raise UsageError(f"{doing}: {exc}" + (f"; {hint}" if hint else "")) from None


def code_key(uri: StoreURI, digest: str) -> str:
    """Where the archive of sha256 ``digest`` lives: ``{prefix}/code/sha256-{digest}.tar.gz``."""
    return uri.key("code", f"sha256-{digest}.tar.gz")


def upload_code(uri: StoreURI, archive: bytes, env: Mapping[str, str] | None = None) -> CodeObject:
    """Put the archive at ``{prefix}/code/sha256-{digest}.tar.gz`` unless an object of that
    name and size is there already."""
    env = os.environ if env is None else env
    digest = hashlib.sha256(archive).hexdigest()
    key = code_key(uri, digest)
    with _as_usage(f"uploading the code to s3://{uri.bucket}/{key}"):
        there = fetcher.head(uri.bucket, key, env)
        if there is not None and there.get("content-length") == str(len(archive)):
            return CodeObject(uri.bucket, key, digest, False, len(archive))
        fetcher.put(uri.bucket, key, archive, env)
    return CodeObject(uri.bucket, key, digest, True, len(archive))


def _local_path(dest: Path, rel: str, key: str, uri: StoreURI) -> Path:
    parts = rel.split("/")
    if any(p in ("", ".", "..") for p in parts) or "\\" in rel:
        raise UsageError(f"s3://{uri.bucket}/{key}: its name below {uri} has an empty, '.' or '..' part, which "
                         f"would not land inside {dest}; nothing was downloaded (fetch it by hand)")
    return dest.joinpath(*parts)


def download_tree(uri_prefix: StoreURI, dest: Path, env: Mapping[str, str] | None = None) -> list[Path]:
    """Every object under ``uri_prefix`` into ``dest``, at its path below the prefix; the files
    written, sorted. Every name is checked before anything is downloaded."""
    env = os.environ if env is None else env
    dest = Path(dest)
    below = f"{uri_prefix.prefix}/" if uri_prefix.prefix else ""
    with _as_usage(f"listing {uri_prefix}"):
        keys = fetcher.list_keys(uri_prefix.bucket, below, env)
    plan: dict[Path, str] = {}
    for key in keys:
        rel = key[len(below):]
        if rel.endswith("/"):
            continue  # a console's "folder" marker, no file
        plan[_local_path(dest, rel, key, uri_prefix)] = key
    for path in plan:
        clash = next((p for p in path.parents if p in plan), None)
        if clash is not None:
            raise UsageError(f"{uri_prefix}: {plan[clash]!r} and {plan[path]!r} are a file and a folder of the same "
                             f"name; nothing was downloaded")
    root = dest.resolve()
    for path, key in sorted(plan.items()):
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.parent.resolve().is_relative_to(root):  # a link already in dest
            raise UsageError(f"{path.parent} leads outside {dest} (a link): s3://{uri_prefix.bucket}/{key} was not "
                             "downloaded")
        part = path.with_name(f".{path.name}.part")  # a failed download leaves no half file under the real name
        try:
            with _as_usage(f"downloading s3://{uri_prefix.bucket}/{key}"):
                fetcher.download(uri_prefix.bucket, key, str(part), env)
            os.replace(part, path)
        finally:
            part.unlink(missing_ok=True)
    return sorted(plan)
