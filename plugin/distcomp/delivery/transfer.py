"""What submit moves through the object store: the code up before the job, the outputs down
after it."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Callable, Mapping

from ..errors import UsageError
from .plan import Delivery

Notify = Callable[[str], None]


def upload(code: Delivery, notify: Notify, env: Mapping[str, str] | None = None) -> None:
    """The code archive into the store, unless an identical one is there (content-addressed)."""
    from .store import pack, upload_code

    assert code.store is not None
    notify(f"code: packing {len(code.files)} files for {code.store}")
    obj = upload_code(code.store, pack(code.files), os.environ if env is None else env)
    if obj.sha256 != code.digest:  # the folder changed between compile and upload: the nodes would refuse it
        raise UsageError(f"the code folder changed while submitting (sha256 {obj.sha256[:12]}, compiled "
                         f"{code.digest[:12]}); submit again")
    state = "uploaded" if obj.uploaded else "already in the store, not uploaded again"
    notify(f"code: s3://{obj.bucket}/{obj.key} {state}")


def download(bucket: str, uploads: Mapping[str, str], where: Mapping[str, str], folder: Path,
             notify: Notify | None) -> dict[str, str]:
    """The outputs uploaded under ``uploads`` (name -> key prefix in ``bucket``) into
    ``folder/NAME``; ``where``: each one's place as the user was told it. A failed download is
    said, the job's state stands."""
    from .store import StoreURI, download_tree

    say = notify or _stderr
    got: dict[str, str] = {}
    for name, key in uploads.items():
        try:
            files = download_tree(StoreURI(bucket, key), folder / name, os.environ)
        except UsageError as exc:
            say(f"warning: output '{name}' stays at {where[name]}: {exc}")
            continue
        if not files:  # the command wrote nothing there, or node 0 could not upload: say so, not "0 files"
            say(f"warning: output '{name}': nothing under {where[name]}")
            continue
        got[name] = str(folder / name)
        say(f"output '{name}': {len(files)} files downloaded to {folder / name}")
    return got


def _stderr(message: str) -> None:
    print(message, file=sys.stderr)
