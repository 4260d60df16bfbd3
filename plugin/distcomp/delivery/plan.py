"""The delivery plan of a job: how its code reaches each node, decided at compile and kept in the
compiled job, so that submit ships exactly what compile showed.

The ways (``Delivery.mode``):

- ``shared``: the nodes see a folder the submitter writes (a Slurm job folder on a shared file
  system); nothing travels;
- ``image``: the image holds the code (baked in with ``distcomp build-context``, or on a volume);
- ``configmap``: a few small files travel with the job itself (Kubernetes only: the kubeflow
  target makes the manifest);
- ``store``: an S3-compatible object store: submit uploads the code as one reproducible tar.gz
  named by its sha256 (``store.code_key``), and each node runs the stdlib fetch step
  (``fetch_argv``) before its node agent starts: download, check the sha256, extract.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Mapping, TypeVar

if TYPE_CHECKING:
    from .store import StoreURI

MODES = ("shared", "image", "configmap", "store")


@dataclass(frozen=True)
class Delivery:
    """What compile decided: how the code reaches the nodes, and why (shown as a note)."""

    mode: str  # shared | image | configmap | store
    why: str
    files: Mapping[str, Path] = field(default_factory=dict)  # relative path in the code folder -> file
    size: int = 0  # bytes of the files
    digest: str = ""  # sha256 of the archive (store)
    key: str = ""  # the archive's object key (store)
    store: "StoreURI | None" = None
    endpoint: str | None = None  # the store's endpoint as the nodes reach it
    region: str | None = None
    packages: tuple[str, ...] = ()

    def shipped(self, dest: str) -> str:
        """The note of code that travels: its files and size, how, and where it lands."""
        how = ("a ConfigMap mounted at" if self.mode == "configmap" else
               f"{self.store} (uploaded at submit when absent; each node fetches it to")
        end = ")" if self.mode == "store" else ""
        return f"code: {len(self.files)} files, {size_text(self.size)}, in {how} {dest}{end}: {self.why}"

    def fetch_argv(self, dest: str, python: str = "python", command: str = "fetch") -> list[str]:
        """The stdlib fetch step: download the archive, check its sha256, extract it into
        ``dest`` (``command`` ``fetch-into``: a new folder that appears whole)."""
        from .store import SOURCE

        assert self.mode == "store" and self.store is not None
        return [python, "-c", SOURCE, command, self.store.bucket, self.key, self.digest, dest]


def size_text(n: int) -> str:
    return f"{n} B" if n < 1024 else f"{n / 1024:.0f} KiB" if n < 1 << 20 else f"{n / (1 << 20):.1f} MiB"


def store_settings(env: Mapping[str, str]) -> tuple[str | None, str | None]:
    """The store's endpoint and region as submit sees them (AWS_ENDPOINT_URL_S3 or
    AWS_ENDPOINT_URL; AWS_REGION or AWS_DEFAULT_REGION): what the nodes are told too."""
    endpoint = env.get("AWS_ENDPOINT_URL_S3") or env.get("AWS_ENDPOINT_URL")
    return endpoint or None, env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or None


P = TypeVar("P", bound=Delivery)


def in_store(plan: P, files: Mapping[str, Path], why: str) -> P:
    """``plan`` shipping ``files`` through its store: their archive's sha256 and object key."""
    from .store import code_key, pack

    assert plan.store is not None
    digest = hashlib.sha256(pack(files)).hexdigest()
    size = sum(p.stat().st_size for p in files.values())
    return replace(plan, mode="store", why=why, files=dict(files), size=size, digest=digest,
                   key=code_key(plan.store, digest))
