"""A Kubeflow job's outputs down from the object store after it (``--download``); the code goes
up through the core (``distcomp.delivery.transfer.upload``)."""

from __future__ import annotations

from pathlib import Path

from ...core.target import Notify
from ._job import KubeflowJob


def download(job: KubeflowJob, folder: Path, notify: Notify | None) -> dict[str, str]:
    """The uploaded outputs into ``folder/NAME``; a failed download is said, the job's state stands."""
    from ...delivery.transfer import download as download_outputs

    assert job.code.store is not None
    return download_outputs(job.code.store.bucket, job.outputs.uploads, job.outputs.where, folder, notify)
