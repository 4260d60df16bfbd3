"""The vocabularies every dialect shares: input types and launcher names."""

from __future__ import annotations

from types import MappingProxyType
from typing import Mapping

# Parameter types as written (any case) -> the canonical name in ComponentSpec.
PARAMETER_TYPES: Mapping[str, str] = MappingProxyType({
    "string": "string",
    "integer": "integer",
    "float": "number",
    "double": "number",
    "number": "number",
    "boolean": "boolean",
    "enum": "enum",
})

# Port types as written (any case) -> what the port holds: a folder, a file, or either.
PORT_TYPES: Mapping[str, str] = MappingProxyType({
    # Component SDK (v1)
    "path": "any",
    "anydirectory": "folder",
    "anyfile": "file",
    "modeldirectory": "folder",
    "datadirectory": "folder",
    "dataframedirectory": "folder",
    "imagedirectory": "folder",
    "csvfile": "file",
    "zipfile": "file",
    # azure-ai-ml (v2)
    "uri_folder": "folder",
    "uri_file": "file",
    "mltable": "folder",
    "mlflow_model": "folder",
    "custom_model": "folder",
    "triton_model": "folder",
})

# How the names appear in messages and in the JSON Schema.
V1_PARAMETER_NAMES = ("String", "Integer", "Float", "Boolean", "Enum")
V1_PORT_NAMES = ("path", "AnyDirectory", "AnyFile", "ModelDirectory", "DataDirectory",
                 "DataFrameDirectory", "ImageDirectory", "CsvFile", "ZipFile")
V2_PARAMETER_NAMES = ("string", "integer", "number", "boolean")
V2_PORT_NAMES = ("uri_folder", "uri_file", "mltable", "mlflow_model", "custom_model", "triton_model")

TORCH = "torch.distributed"
MPI = "mpi"
TENSORFLOW = "tensorflow.distributed"
DEEPSPEED = "deepspeed"

# Launcher names and the aliases users write, lowercased -> canonical name. The plugin
# manager (issue #3) extends this table; validation takes whatever table it is given.
BUILTIN_LAUNCHERS: Mapping[str, str] = MappingProxyType({
    TORCH: TORCH, "pytorch": TORCH, "torch": TORCH, "pytorch.distributed": TORCH,
    MPI: MPI, "horovod": MPI, "openmpi": MPI,
    TENSORFLOW: TENSORFLOW, "tensorflow": TENSORFLOW, "tf": TENSORFLOW, "tf.distributed": TENSORFLOW,
    DEEPSPEED: DEEPSPEED,
})


def canonical_launcher(name: str, table: Mapping[str, str] = BUILTIN_LAUNCHERS) -> str | None:
    """The canonical launcher for ``name`` (any case, any alias), or None if unknown."""
    return table.get(name.strip().lower())


def describe_launchers(table: Mapping[str, str] = BUILTIN_LAUNCHERS) -> str:
    """``one of: mpi, ...; aliases: pytorch -> torch.distributed, ...`` for error messages."""
    names = sorted(set(table.values()))
    aliases = sorted(k for k, v in table.items() if k != v)
    return "one of: " + ", ".join(names) + (f" (aliases: {', '.join(aliases)})" if aliases else "")
