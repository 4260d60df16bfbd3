"""The one error the MLflow target raises outside MLflow: a message a user can act on."""


class MlflowTargetError(ValueError):
    """The spec cannot become an MLflow project, or a backend config cannot be used."""
