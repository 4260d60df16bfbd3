"""The MLproject file of a component and the job record beside it: one entry point, ``main``,
whose parameters are the component's inputs and whose command is ``python -m distcomp.worker
distcomp-job.json NAME={NAME} ...``.

The record (``distcomp.core.jobrecord``, versioned) says what runs: the spec beside it, the layout
given at compile time, and the parameters the command line gives. MLflow fills ``{NAME}`` with
the shell-quoted value and has no conditional commands, so an optional input without a
default has the default ``""`` and the rule ``if-set`` in the record: an empty value there is
"not given", and its ``[ ... ]`` block vanishes. Never CLI flags: a project compiled by one
distcomp runs with another, or is refused with what to do.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import yaml

from ...core.jobrecord import JobRecord

if TYPE_CHECKING:  # the backend reads WORKER: `mlflow run -b distcomp` imports no spec loader
    from ...spec import ComponentSpec, InputSpec

MARKER = "# Written by `distcomp compile --target mlflow`"
MLPROJECT = "MLproject"
RECORD = "distcomp-job.json"
ENTRY_POINT = "main"
WORKER = ("python", "-m", "distcomp.worker")


def parameter(inp: InputSpec) -> dict[str, str]:
    """The MLflow parameter of one input: ``float`` for numbers, ``path`` for ports (MLflow makes
    a local path absolute and downloads a URI), ``string`` for the rest (MLflow has no integer)."""
    from ...spec import render_value

    kind = "path" if inp.is_port else "float" if inp.type == "number" else "string"
    if inp.default is not None:
        default = render_value(inp.default)
        if kind == "path" and "://" not in default and not default.startswith("/"):
            # a relative path: MLflow would look for it where `mlflow run` starts, distcomp looks
            # in the project (where it was copied with the code)
            kind = "string"
        return {"type": kind, "default": default}
    if inp.optional:  # "" means unset; MLflow would refuse "" as a path
        return {"type": "string" if kind == "path" else kind, "default": ""}
    return {"type": kind}


def record(spec: ComponentSpec, spec_file: str, nodes: int | None = None,
           nproc_per_node: int | None = None) -> JobRecord:
    """The project's job record: run the spec beside it, with its inputs from the command line."""
    options = {key: value for key, value in (("nodes", nodes), ("nproc_per_node", nproc_per_node))
               if value is not None}
    params = {name: "if-set" if inp.default is None and inp.optional else "value" for name, inp in spec.inputs.items()}
    return JobRecord("run", spec_file, options=options, params=params)


def command(spec: ComponentSpec) -> str:
    """``python -m distcomp.worker RECORD NAME={NAME} ...`` (names are identifiers: no quoting)."""
    return " ".join([*WORKER, RECORD, *(f"{name}={{{name}}}" for name in spec.inputs)])


def mlproject_text(spec: ComponentSpec, spec_file: str) -> str:
    """The MLproject file; its first line marks it as distcomp's, so compiling again may replace it."""
    data = {
        "name": spec.name,
        "entry_points": {ENTRY_POINT: {
            "parameters": {name: parameter(inp) for name, inp in spec.inputs.items()},
            "command": command(spec),
        }},
    }
    head = (f"{MARKER} from {spec_file} ({spec.ref}), with its job record {RECORD}.\n"
            "# Run it: mlflow run DIR -b distcomp -c '{\"nproc_per_node\": 2}' --env-manager local -P NAME=VALUE\n")
    return head + yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=1000)


def is_ours(text: str) -> bool:
    return text.startswith(MARKER)
