"""The vocabularies every dialect shares: input types and launcher names."""

from __future__ import annotations

from types import MappingProxyType
from typing import Mapping

from ..base import launchernames as _launchernames

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
# a step with no launcher (a v2 command without distribution: a pipeline's data-prep step): its
# command runs as one process on one node, laid out by the core (``distcomp.core.plan``), no plugin's
NO_LAUNCHER = "none"


# Launcher names and aliases are not kept here: the plugin manager is their one source of
# truth (each launcher, built-in or plugin, declares its own). It sits above this layer, so the
# package's __init__ hands its lookups to ``distcomp.base.launchernames``; asked on use, so that
# importing the spec layer loads no plugin.
def installed_launchers() -> Mapping[str, str]:
    """Every launcher name and alias, lowercased -> canonical name, that the process-wide
    plugin manager knows: the built-ins and every installed plugin."""
    return _launchernames.table("installed")


def builtin_launchers() -> Mapping[str, str]:
    """The same table with the built-in launchers only (no installed plugin)."""
    return _launchernames.table("builtin")


def canonical_launcher(name: str, table: Mapping[str, str] | None = None) -> str | None:
    """The canonical launcher for ``name`` (any case, any alias), or None if unknown;
    ``table`` defaults to the installed launchers."""
    return (installed_launchers() if table is None else table).get(name.strip().lower())


def describe_launchers(table: Mapping[str, str]) -> str:
    """``one of: mpi, ...; aliases: pytorch -> torch.distributed, ...`` for error messages."""
    names = sorted(set(table.values()))
    aliases = sorted(k for k, v in table.items() if k != v)
    return "one of: " + ", ".join(names) + (f" (aliases: {', '.join(aliases)})" if aliases else "")
