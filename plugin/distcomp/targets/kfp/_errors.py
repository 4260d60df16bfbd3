"""The one error the KFP target raises: a message a user can act on, never kfp's traceback."""

from ...errors import UsageError


class KfpTargetError(UsageError, ValueError):
    """The spec cannot become a KFP step (unreadable spec, a name KFP cannot take, too much code
    to embed, more than one node...)."""
