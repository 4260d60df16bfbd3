"""The Azure ML target's error (its own module, so every part of the target raises it without
importing the component builder)."""

from __future__ import annotations

from ...errors import UsageError

__all__ = ["AzureMLTargetError"]


class AzureMLTargetError(UsageError, ValueError):
    """The spec cannot become an Azure ML component; the message says what to change."""
