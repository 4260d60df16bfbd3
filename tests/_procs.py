"""Ending a server a test started in its own process group (``start_new_session=True``)."""

from __future__ import annotations

import os
import signal
import subprocess


def stop_group(proc: subprocess.Popen[bytes], grace: float = 15) -> None:
    """SIGTERM to ``proc``'s group, SIGKILL if it lingers past ``grace`` seconds; reaped either way."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(grace)
    except ProcessLookupError:
        pass
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
