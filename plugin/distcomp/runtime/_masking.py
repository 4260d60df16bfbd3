"""What a rank logs, masked by the one rule (``distcomp.base.redact``): the values of the rank's own
secret-named environment variables (``CLOUD_AUTH``, ``MY_SECRET``, a Kubernetes pod's
``DISTCOMP_SECRET_N``) become ``***`` in every param and tag value, and in the text of a logged
text or dict artifact, whether through ``distcomp.runtime`` or MLflow's own API (the hook).

The rank learns nothing it did not hold: the values come from its own environment, read at
each call (a script may set a variable late); the masker is made again only when they change.
"""

from __future__ import annotations

import os
import threading
from typing import Any

_lock = threading.Lock()
_made: tuple[tuple[str, ...], Any] | None = None  # (the secrets, their Masker)


def masker() -> Any:
    """The Masker of this process's environment as it is now (``redact.Masker``)."""
    global _made
    from ..base.redact import Masker, env_secrets

    secrets = tuple(env_secrets(os.environ))
    made = _made
    if made is not None and made[0] == secrets:
        return made[1]
    with _lock:
        _made = (secrets, Masker.of_secrets(secrets))
        return _made[1]


def text(value: str) -> str:
    """``value`` with every secret of the environment masked."""
    m = masker()
    return m.text(value) if m else value


def data(value: Any) -> Any:
    """A JSON-like value with every string in it masked (its keys are names, kept)."""
    m = masker()
    return m.data(value) if m else value
