"""A spec's inputs and outputs as the typed signature of a KFP Python component.

KFP reads a lightweight component's interface from its function's annotations, so the
mapping is written as Python source: parameters become ``int``/``float``/``bool``/``str``,
ports ``dsl.Input[...]`` artifacts, outputs ``dsl.Output[...]``. Nothing here imports kfp.
"""

from __future__ import annotations

import keyword
import re
from dataclasses import dataclass
from typing import Any

from ...spec import ComponentSpec, InputSpec, OutputSpec
from ._errors import KfpTargetError

# Canonical parameter type -> its Python annotation (KFP has no enum: a string).
PARAMETER_ANNOTATIONS = {"integer": "int", "number": "float", "boolean": "bool", "string": "str", "enum": "str"}

# Port type (lowercase, as written) -> KFP artifact class; anything else is a plain Artifact,
# which KFP lets any artifact flow into.
ARTIFACT_CLASSES = {
    "datadirectory": "Dataset", "dataframedirectory": "Dataset", "imagedirectory": "Dataset",
    "csvfile": "Dataset", "mltable": "Dataset",
    "modeldirectory": "Model", "mlflow_model": "Model", "custom_model": "Model", "triton_model": "Model",
}

# Names a parameter cannot take: KFP's single-output name, and the helpers the body calls
# (a parameter would shadow them inside the function).
RESERVED = frozenset({"Output", "input_text", "run_distcomp_step", "run_distcomp_submit", "step_record",
                      "submit_record", "unpack"})
# Names the function's module (and kfp's, where it runs) already uses.
MODULE_NAMES = frozenset({"kfp", "dsl", "Any", "Optional"})


@dataclass(frozen=True)
class StepInput:
    name: str  # the spec's input name, which is also the KFP parameter's
    type: str  # canonical parameter type, or "port": how the step renders the value
    annotation: str  # Python source
    default: str | None  # Python source; None: required

    @property
    def required(self) -> bool:
        return self.default is None


@dataclass(frozen=True)
class StepOutput:
    name: str
    annotation: str


@dataclass(frozen=True)
class StepInterface:
    function: str  # the Python function name; KFP derives the component name from it
    inputs: tuple[StepInput, ...]
    outputs: tuple[StepOutput, ...]
    description: str


def step_interface(spec: ComponentSpec) -> StepInterface:
    """The component's signature; names KFP cannot take are an error naming every one."""
    # The spec already holds names to distinct identifiers; Python and KFP take fewer.
    problems = [f"{what} '{name}' cannot be a KFP parameter name (a Python keyword, or one of "
                f"{', '.join(sorted(RESERVED))})"
                for what, names in (("input", spec.inputs), ("output", spec.outputs)) for name in names
                if keyword.iskeyword(name) or name in RESERVED]
    inputs = tuple(_input(inp) for inp in spec.inputs.values())
    outputs = tuple(StepOutput(name, f"dsl.Output[dsl.{_artifact(out.type)}]") for name, out in spec.outputs.items())
    if problems:
        raise KfpTargetError(f"{spec.ref}: " + "; ".join(problems))
    function = re.sub(r"\W", "_", spec.name).strip("_") or "component"
    if not function[0].isalpha() or keyword.iskeyword(function) or function in MODULE_NAMES:
        function = "component_" + function
    return StepInterface(function, inputs, outputs, _description(spec))


def _input(inp: InputSpec) -> StepInput:
    if inp.is_port:
        # KFP artifacts have no defaults: a port with a default path is optional, and distcomp
        # applies the default inside the step, as `distcomp run` does.
        annotation = f"dsl.Input[dsl.{_artifact(inp.type)}]"
        optional = inp.optional or inp.default is not None
        return StepInput(inp.name, "port", annotation, "None" if optional else None)
    python = PARAMETER_ANNOTATIONS.get(inp.type, "str")
    if inp.default is not None:
        return StepInput(inp.name, inp.type, python, _literal(inp.type, inp.default))
    if inp.optional:
        return StepInput(inp.name, inp.type, f"Optional[{python}]", "None")
    return StepInput(inp.name, inp.type, python, None)


def _artifact(port_type: str) -> str:
    return ARTIFACT_CLASSES.get(port_type.lower(), "Artifact")


def _literal(kind: str, value: Any) -> str:
    """A default as Python source of the parameter's type (KFP types the IR default by it)."""
    if kind == "number":
        return repr(float(value))
    if kind in ("string", "enum"):
        return repr(str(value))
    return repr(value)


def _description(spec: ComponentSpec) -> str:
    """The docstring: KFP takes the component description and each argument's from it."""
    head = " ".join((spec.description or spec.display_name or spec.name).split())
    lines = [head, "", f"Runs distcomp component {spec.ref} ({spec.distribution.launcher})."]
    described: list[InputSpec | OutputSpec] = [*spec.inputs.values(), *spec.outputs.values()]
    args = [f"    {item.name}: {' '.join(item.description.split())}" for item in described if item.description]
    if args:
        lines += ["", "Args:", *args]
    return "\n".join(lines)
