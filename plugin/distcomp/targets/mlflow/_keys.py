"""The backend config keys of ``"target": NAME``: the options that target declares.

Any target that submits (``TargetType.submits``, found through the plugin manager, a third
party's as well as distcomp's) takes its own ``TargetOption`` names as keys, checked by the
option's kind and its own ``check``, plus ``nodes`` and ``nproc_per_node``. Not keys: what
MLflow gives the job itself (``inputs``: the entry point's parameters; ``tracking`` and
``experiment``: the run ``mlflow run`` created).

A path option (``TargetOption.path``) is read where ``mlflow run`` started, as ``distcomp
submit`` would read it there (the job itself starts in the project's folder): a path on this
machine (``"here"``) is made absolute against that folder; a path where the job runs
(``"there"``: nodes that see none of this machine's folders) must be absolute already.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

from ...errors import DistcompError, UsageError

if TYPE_CHECKING:
    from ...core.target import TargetOption, TargetType

LAYOUT = {"nodes": "an integer >= 1", "nproc_per_node": "an integer >= 1"}
# a submitting target's options that MLflow gives the job itself, and where
NOT_KEYS = {
    "inputs": "the job's inputs are the entry point's parameters: give them as -P NAME=VALUE",
    "tracking": "the job's MLflow run is the one `mlflow run` creates",
    "experiment": "the run's experiment is mlflow run's --experiment-name / --experiment-id",
}


def submitting_targets() -> dict[str, "TargetType"]:
    """Every installed target that submits, but local (which the backend runs itself), by name."""
    from ...core.plugins import get_plugin_manager

    return {name: found.type for name, found in get_plugin_manager().targets().items()
            if found.type.submits and name != "local"}


def keys_of(target: "TargetType") -> dict[str, "TargetOption | None"]:
    """The keys ``target`` takes: its options (by record), and the layout (None)."""
    keys: dict[str, TargetOption | None] = {key: None for key in LAYOUT}
    keys.update({o.name: o for o in target.options if o.name not in NOT_KEYS})
    return keys


def expected(option: "TargetOption") -> str:
    """What the option's value must be, in JSON's terms."""
    low = option.minimum
    bound = "" if low is None else " > 0" if 0 < low < 1e-6 else f" >= {low:g}"
    if option.kind == "pairs":
        name, _, value = (option.metavar or "NAME=VALUE").partition(option.separator)
        return f'a mapping {{"{name}": "{value or "VALUE"}", ...}}'
    what = {"int": f"an integer{bound}", "float": f"a number{bound}", "bool": "true or false",
            "list": "a list of text"}.get(option.kind, "text")
    return what + (f" ({option.metavar})" if option.metavar and option.kind != "bool" else "")


def _shape_ok(option: "TargetOption", value: Any) -> bool:
    """JSON's shape of the option's kind (stricter than the CLI's: a list is a list)."""
    if option.kind == "list":
        return isinstance(value, list) and all(isinstance(v, str) and v.strip() for v in value)
    if option.kind == "pairs":
        return isinstance(value, dict)
    if option.kind == "str":
        return isinstance(value, str) and value.strip() != ""
    return value is not None


def check_value(target: "TargetType", option: "TargetOption", value: Any, cwd: Path) -> Any:
    """``value`` as the job record holds it (JSON data), or a UsageError saying what it must be."""
    from ...core.target import TargetOption

    custom = type(option).check is not TargetOption.check  # its own reading: its own message
    if not custom and not _shape_ok(option, value):
        raise UsageError(f"backend config {option.name}: expected {expected(option)}, got {value!r}")
    if option.path and (isinstance(value, str) or isinstance(value, dict)
                             and all(isinstance(v, str) for v in value.values())):
        value = _paths(target, option, value, cwd)
    try:
        checked = option.check(value, target.name)
    except DistcompError as exc:
        raise UsageError(f"backend config {option.name}: " + (str(exc) if custom else
                         f"expected {expected(option)}, got {value!r}")) from None
    if custom:  # what it read may not be JSON (a file's content): the record holds what was given
        return value
    return dict(checked) if isinstance(checked, Mapping) else list(checked) if isinstance(checked, tuple) else checked


def _paths(target: "TargetType", option: "TargetOption", value: Any, cwd: Path) -> Any:
    """A path option's value(s) read where ``mlflow run`` started (see the module's doc)."""
    def one(path: str, shown: str) -> str:
        if os.path.isabs(os.path.expanduser(path)):
            return os.path.expanduser(path)
        if option.path == "here":
            return str(cwd / Path(path).expanduser())
        raise UsageError(f"backend config {option.name}: {shown} is a relative path; target {target.name!r} runs "
                         "on nodes that do not see this folder: give an absolute path they see")

    if isinstance(value, dict):
        return {k: one(v, f"{k!r}: {v!r}") for k, v in value.items()}
    return one(value, repr(value))
