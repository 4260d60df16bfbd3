"""``job_options`` of a multi-node KFP step: options of the kubeflow target for the training
pods, by their Python names (``{"gpus_per_node": 1, "memory": "16Gi"}``), checked at compile
time against the kubeflow target's declared ``TargetOption`` records, as ``distcomp.submit``
checks them in the step: a typo fails here, not in the cluster.

The command line gives them as ``--job-option NAME=VALUE`` text, read by the option's kind (a
list or pairs option repeats).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from ...errors import UsageError
from ...core.target import TargetOption
from ._errors import KfpTargetError, ask, name as asked_name

if TYPE_CHECKING:
    from ...core.target import TargetType

# what the step gives the kubeflow target itself: the layout, where the spec, code and data are
# ({param}: how the caller gives it, see _errors.ask)
STEP_SET = {
    "nodes": "pass {nodes}", "nproc_per_node": "pass {nproc_per_node}",
    "image": "pass {image}", "timeout": "pass {timeout}", "poll": "pass {poll}",
    "volumes": "pass {shared_volume}", "workdir": "the step runs in the code on the shared volume",
    "name": "the step names each job", "namespace": "the job goes to the step's own namespace",
    "inputs": "the pipeline gives the inputs", "output_paths": "the outputs go to the shared volume",
    "kubeconfig": "the step uses its pod's service account", "inherit_pod": "the step always passes its pod on",
    "tracking": "the step tracks where MLFLOW_TRACKING_URI says", "experiment": "set MLFLOW_EXPERIMENT_NAME",
    "download": "the step copies the outputs into its artifacts",
    "max_restarts": "the step's retry submits the whole job again: pass {max_restarts}"}


def _kubeflow() -> "TargetType":
    from ...core.plugins import get_plugin_manager

    return get_plugin_manager().target("kubeflow").type


def _text_value(option: TargetOption, text: str, into: dict[str, Any], shown: str) -> None:
    """One ``NAME=VALUE`` text into ``into``, as the option's kind reads it."""
    kind, name = option.kind, option.name
    try:
        if kind == "int":
            into[name] = int(text)
        elif kind == "float":
            into[name] = float(text)
        elif kind == "bool":
            if text.lower() not in ("true", "false"):
                raise ValueError
            into[name] = text.lower() == "true"
        elif kind == "list":
            into.setdefault(name, []).append(text)
        elif kind == "pairs":
            key, sep, value = text.partition(option.separator)
            if not sep or not key:
                raise ValueError
            into.setdefault(name, {})[key] = value
        else:
            into[name] = text
    except ValueError:
        what = {"int": "a whole number", "float": "a number", "bool": "true or false",
                "pairs": option.metavar or f"KEY{option.separator}VALUE"}.get(kind, "a value")
        raise KfpTargetError(f"job option {shown!r}: {name} takes {what}") from None


def _option(kubeflow: "TargetType", name: str, shown: str) -> TargetOption:
    found = kubeflow.option(name)
    if found is None or name in STEP_SET:
        _refuse(kubeflow, name, shown)
    assert found is not None
    return found


def _refuse(kubeflow: "TargetType", name: str, shown: str) -> None:
    if name in STEP_SET:
        how = STEP_SET[name].format_map({p: ask(p) for p in ("nodes", "nproc_per_node", "image", "timeout", "poll",
                                                             "shared_volume", "max_restarts")})
        raise KfpTargetError(f"job option {shown!r}: the step sets {name} itself ({how})")
    known = ", ".join(sorted(o.name for o in kubeflow.options if o.name not in STEP_SET))
    raise KfpTargetError(f"job option {shown!r}: {name!r} is not an option of the kubeflow target (known: {known})")


def from_texts(words: Sequence[str]) -> dict[str, Any]:
    """``--job-option NAME=VALUE`` words as the mapping ``load_component`` takes."""
    kubeflow = _kubeflow()
    out: dict[str, Any] = {}
    for word in words:
        name, sep, text = word.partition("=")
        if word.startswith("-"):  # a `distcomp submit` flag: options go by their names
            raise KfpTargetError(f"{asked_name('job_options')} {word!r}: give the kubeflow target's options by "
                                 f"name, not as flags: {ask('job_options')} (e.g. gpus_per_node=1)")
        if not sep:
            raise KfpTargetError(f"job option {word!r}: expected NAME=VALUE, NAME an option of the kubeflow "
                                 "target (e.g. gpus_per_node=1)")
        _text_value(_option(kubeflow, name, word), text, out, word)
    return out


def checked(options: Mapping[str, Any]) -> dict[str, Any]:
    """``options`` checked as the kubeflow target checks them in the step (names, kinds,
    minimums); returned as plain JSON data, in a fixed order, for the compiled job record."""
    kubeflow = _kubeflow()
    if not isinstance(options, Mapping):
        raise KfpTargetError(f"job_options must map kubeflow target options to values (got "
                             f"{type(options).__name__}), e.g. {{'gpus_per_node': 1, 'memory': '16Gi'}}")
    for name in options:
        if name in STEP_SET or kubeflow.option(name) is None:
            _refuse(kubeflow, name, f"{name}={options[name]!r}")
    try:
        kubeflow.bind(dict(options), submitting=True)
    except UsageError as exc:
        raise KfpTargetError(f"job_options: {exc}") from None
    try:
        return dict(json.loads(json.dumps(dict(options), sort_keys=True)))
    except (TypeError, ValueError) as exc:
        raise KfpTargetError(f"job_options: the values must be text, numbers, booleans, lists or mappings "
                             f"({exc})") from None
