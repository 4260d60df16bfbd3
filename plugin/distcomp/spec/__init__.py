"""The DistributedComponent spec: three dialects, one immutable ComponentSpec.

>>> from distcomp.spec import load
>>> spec = load("components/pytorch-ddp-train/component.yaml")  # doctest: +SKIP
>>> spec.render({"epochs": 3}, {"model": "/tmp/model"})          # doctest: +SKIP
['python', 'train.py', '--epochs', '3', '--model', '/tmp/model']
"""

from ._diagnostics import Diagnostic, SpecError
from ._jsonschema import json_schema
from ._limits import MAX_ARG_STRLEN, arg_problem, command_problems, utf8_problem
from ._loader import DIALECTS, LoadResult, check_file, check_text, detect, load, loads
from ._model import ComponentSpec, Distribution, EnvironmentSpec, InputSpec, OutputSpec, RoleSpec
from ._paths import SymlinkLoop, resolve as resolve_path
from ._template import CommandTemplate, RenderError
from ._types import NO_LAUNCHER, builtin_launchers, canonical_launcher, installed_launchers
from ._values import InputError, bind_inputs, check_inputs, is_uri, parse_value, render_value, unknown_outputs

__all__ = [
    "CommandTemplate", "ComponentSpec", "DIALECTS", "Diagnostic", "Distribution",
    "EnvironmentSpec", "InputError", "InputSpec", "LoadResult", "MAX_ARG_STRLEN", "NO_LAUNCHER", "OutputSpec", "RenderError",
    "RoleSpec", "SpecError", "SymlinkLoop", "arg_problem", "bind_inputs", "builtin_launchers", "canonical_launcher",
    "check_file", "check_inputs", "check_text", "command_problems", "detect", "installed_launchers", "is_uri", "json_schema", "load",
    "loads", "parse_value", "render_value", "resolve_path", "unknown_outputs", "utf8_problem",
]
