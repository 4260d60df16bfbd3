import os
import signal
from pathlib import Path
from typing import Iterator

import psutil
import pytest


@pytest.fixture(autouse=True)
def _kill_leftovers(tmp_path: Path) -> Iterator[None]:
    """Whatever a failed test left running (a rank whose command line names this test's
    folder) is killed afterwards, so it cannot disturb the tests after it."""
    yield
    for p in psutil.process_iter(["pid", "cmdline"]):
        if p.info["pid"] != os.getpid() and str(tmp_path) in " ".join(p.info["cmdline"] or ()):
            try:
                os.kill(p.info["pid"], signal.SIGKILL)
            except ProcessLookupError:
                pass
