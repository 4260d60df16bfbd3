"""The MLproject file of a component: one entry point, ``main``, whose parameters are the
component's inputs and whose command is ``distcomp run SPEC --input NAME={NAME} ...``.

MLflow fills ``{NAME}`` with the shell-quoted value and has no conditional commands, so an
optional input without a default is passed as ``--input-if-set NAME={NAME}`` with the default
``""``: ``distcomp run`` reads an empty value there as "not given", and its ``[ ... ]`` block
vanishes as it would without the flag.
"""

from __future__ import annotations

import shlex

import yaml

from ...spec import ComponentSpec, InputSpec, render_value

MARKER = "# Written by `distcomp compile --target mlflow`"
MLPROJECT = "MLproject"
ENTRY_POINT = "main"


def parameter(inp: InputSpec) -> dict[str, str]:
    """The MLflow parameter of one input: ``float`` for numbers, ``path`` for ports (MLflow makes
    a local path absolute and downloads a URI), ``string`` for the rest (MLflow has no integer)."""
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


def command(spec_file: str, spec: ComponentSpec, nodes: int | None = None,
            nproc_per_node: int | None = None) -> str:
    """``distcomp run SPEC ...`` with a ``{NAME}`` placeholder per input (names are identifiers)."""
    parts = ["distcomp", "run", shlex.quote(spec_file).replace("{", "{{").replace("}", "}}")]
    if nodes is not None:
        parts += ["--nodes", str(nodes)]
    if nproc_per_node is not None:
        parts += ["--nproc-per-node", str(nproc_per_node)]
    for name, inp in spec.inputs.items():
        flag = "--input-if-set" if inp.default is None and inp.optional else "--input"
        parts += [flag, f"{name}={{{name}}}"]
    return " ".join(parts)


def mlproject_text(spec: ComponentSpec, spec_file: str, nodes: int | None = None,
                   nproc_per_node: int | None = None) -> str:
    """The MLproject file; its first line marks it as distcomp's, so compiling again may replace it."""
    data = {
        "name": spec.name,
        "entry_points": {ENTRY_POINT: {
            "parameters": {name: parameter(inp) for name, inp in spec.inputs.items()},
            "command": command(spec_file, spec, nodes, nproc_per_node),
        }},
    }
    head = (f"{MARKER} from {spec_file} ({spec.ref}).\n"
            "# Run it: mlflow run DIR -b distcomp -c '{\"nproc_per_node\": 2}' --env-manager local -P NAME=VALUE\n")
    return head + yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=1000)


def is_ours(text: str) -> bool:
    return text.startswith(MARKER)
