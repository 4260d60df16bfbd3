"""One rule for what is secret, used wherever a value could be written down: MLflow params and
tags, the header of every rank log, ``status.json`` and the console.

A name is secret when it contains one of the words below, in any case (``api_key``,
``DB_PASSWORD``, ``authToken``, ``aws_credentials``). Over-masking is the safe error: a
``monkey`` input is masked too.

>>> is_secret("db_password"), is_secret("epochs")
(True, False)
>>> mask("--password hunter2 --epochs 3", ["hunter2"])
'--password *** --epochs 3'
"""

from __future__ import annotations

import re
from typing import Any, Iterable, Mapping, Sequence

__all__ = ["REDACTED", "SECRET_NAME", "is_secret", "mask", "mask_argv", "secret_values"]

SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|PWD|AUTH|CRED|PRIVATE", re.IGNORECASE)
REDACTED = "***"
_MIN_LEN = 3  # masking a 1-2 character value would blank out unrelated text everywhere


def is_secret(name: str) -> bool:
    """True when a value under ``name`` must never be written in clear."""
    return SECRET_NAME.search(name) is not None


def secret_values(values: Mapping[str, Any]) -> list[str]:
    """The values (as text) of the secret-named entries of ``values``, longest first."""
    found = {str(v) for k, v in values.items() if v is not None and is_secret(k) and len(str(v)) >= _MIN_LEN}
    return sorted(found, key=len, reverse=True)


def mask(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every occurrence of each secret value replaced by ``***``."""
    for value in secrets:
        if len(value) >= _MIN_LEN and value in text:
            text = text.replace(value, REDACTED)
    return text


def mask_argv(argv: Sequence[str], secrets: Iterable[str]) -> list[str]:
    """A copy of ``argv`` safe to show: every secret value masked inside every word."""
    values = list(secrets)
    return [mask(word, values) for word in argv]
