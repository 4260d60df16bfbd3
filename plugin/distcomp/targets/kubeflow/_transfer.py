"""What submit moves through the object store: the code up before the job, the outputs down
after it (``--download``)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from ...errors import UsageError
from ...target import Notify
from ._code import CodePlan
from ._job import KubeflowJob


def upload(code: CodePlan, notify: Notify) -> None:
    """The code archive into the store, unless an identical one is there (content-addressed)."""
    from ._store import pack, upload_code

    assert code.store is not None
    notify(f"code: packing {len(code.files)} files for {code.store}")
    obj = upload_code(code.store, pack(code.files), os.environ)
    if obj.sha256 != code.digest:  # the folder changed between compile and upload: the pods would refuse it
        raise UsageError(f"the code folder changed while submitting (sha256 {obj.sha256[:12]}, compiled "
                         f"{code.digest[:12]}); submit again")
    state = "uploaded" if obj.uploaded else "already in the store, not uploaded again"
    notify(f"code: s3://{obj.bucket}/{obj.key} {state}")


def download(job: KubeflowJob, folder: Path, notify: Notify | None) -> dict[str, str]:
    """The uploaded outputs into ``folder/NAME``; a failed download is said, the job's state stands."""
    from ._store import StoreURI, download_tree

    assert job.code.store is not None
    got: dict[str, str] = {}
    for name, key in job.outputs.uploads.items():
        try:
            files = download_tree(StoreURI(job.code.store.bucket, key), folder / name, os.environ)
        except UsageError as exc:
            (notify or _stderr)(f"warning: output '{name}' stays at {job.outputs.where[name]}: {exc}")
            continue
        if not files:  # the command wrote nothing there, or node 0 could not upload: say so, not "0 files"
            (notify or _stderr)(f"warning: output '{name}': nothing under {job.outputs.where[name]}")
            continue
        got[name] = str(folder / name)
        (notify or _stderr)(f"output '{name}': {len(files)} files downloaded to {folder / name}")
    return got


def _stderr(message: str) -> None:
    print(message, file=sys.stderr)
