"""distcomp: one DistributedComponent spec, run the same way locally, on Kubeflow, Azure ML and MLflow."""

__version__ = "0.1.0"
__all__ = ["__version__"]
