"""The one error the MLflow target raises outside MLflow: a message a user can act on."""

from ...errors import UsageError


class MlflowTargetError(UsageError, ValueError):
    """The spec cannot become an MLflow project, or a backend config cannot be used."""
