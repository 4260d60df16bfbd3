"""``python -m distcomp.targets.slurm._forget FOLDER``: what a job's script runs when the job has
ended by itself (``_script.FORGET_SECRETS``): the ranks' logs masked in place with the job's
secrets, then the secrets file removed. Masked first, as ``distcomp status`` masks them when it
records the end: once the file is gone, nothing could mask them any more. (Slurm's own
``slurm-ID.out`` is the script's open output: it is left to that record, the agents having
masked what they wrote in it.)"""

from __future__ import annotations

import sys
from pathlib import Path

from .. import _secrets


def forget(folder: Path) -> None:
    from ._target import _mask_file

    masker = _secrets.read(folder / _secrets.NAME)
    for path in [*(folder / "logs").glob("*.log"), *(folder / "errors").glob("*"), *folder.glob("rank*.error.json")]:
        _mask_file(path, masker)
    (folder / _secrets.NAME).unlink(missing_ok=True)


if __name__ == "__main__":
    forget(Path(sys.argv[1]))
