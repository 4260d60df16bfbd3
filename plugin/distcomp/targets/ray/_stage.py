"""The package that travels with a Ray job (``runtime_env.py_modules``): distcomp's node agent
(stdlib only), the job's driver, distcomp's MLflow hook for the ranks (``_site``), and ``job/driver.json`` (plus ``job/secrets.sh``, mode 600,
when the job has secrets). The cluster needs no distcomp: this is all of it that runs there."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any, Mapping

from ...base.files import write_atomic
from .. import _secrets
from ._compile import PACKAGE


def stage(folder: Path, config: Mapping[str, Any], masker: Any) -> Path:
    """``folder/PACKAGE``, ready to upload."""
    from ... import agent

    package = folder / PACKAGE
    package.mkdir(parents=True)
    for path in sorted(Path(agent.__file__).parent.glob("*.py")):
        shutil.copyfile(path, package / path.name)
    shutil.copyfile(Path(__file__).with_name("_driver.py"), package / "driver.py")
    (package / "_site").mkdir()  # distcomp's MLflow hook for the ranks (it imports distcomp once mlflow is)
    hook = Path(agent.__file__).parents[1] / "runtime" / "_site" / "sitecustomize.py"
    shutil.copyfile(hook, package / "_site" / "sitecustomize.py")
    (package / "job").mkdir()
    write_atomic(package / "job" / "driver.json", json.dumps(dict(config), indent=1) + "\n")
    if masker:
        _secrets.write(package / "job" / _secrets.NAME, masker)
    os.chmod(package / "job", 0o700)
    return package
