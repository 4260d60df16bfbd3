"""Port values a Kubeflow pod cannot open: a pod sees files, not Azure ML assets or URLs.

Azure ML mounts or downloads ``azureml:``, ``wasbs://``, ``https://`` ... inputs before the
command starts; a Kubeflow pod would get the URI text as if it were a path, and the program
would fail later on a path that does not exist. Refuse it up front, naming what to give.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping

from ...spec import is_uri

if TYPE_CHECKING:
    from ...spec import ComponentSpec

_KINDS = (
    (("azureml:",), "an Azure ML data asset or datastore URI"),
    (("wasb://", "wasbs://", "abfs://", "abfss://", "adl://"), "an Azure Storage URI"),
    (("http://", "https://"), "a web URL"),
    (("s3://", "gs://", "gcs://"), "an object store URI"),
    (("git+",), "a git URL"),
)


def _kind(value: str) -> str:
    low = value.lower()
    return next((what for prefixes, what in _KINDS if low.startswith(prefixes)), "a URI")


def pod_path_problems(spec: "ComponentSpec", values: Mapping[str, Any], given: Mapping[str, Any],
                      outputs: Mapping[str, str]) -> list[str]:
    """One line for every port input (given or by default) and output path that is a URI."""
    problems = []
    for name, value in values.items():
        inp = spec.inputs.get(name)
        if inp is None or not inp.is_port or not isinstance(value, str) or not is_uri(value):
            continue
        origin = "" if name in given else " (its default in the spec)"
        problems.append(f"input '{name}' is {value!r}{origin}, {_kind(value)} that a Kubeflow pod cannot read as a "
                        f"path: give a path the pods see, e.g. --input {name}=/data/{name} on a --volume CLAIM:/data "
                        "holding it (download it there first)")
    for name, path in outputs.items():
        if is_uri(path):
            problems.append(f"output '{name}' is {path!r}, {_kind(path)} that a Kubeflow pod cannot write as a path: "
                            f"give a path the pods see, e.g. --output-path {name}=/data/{name} on a --volume CLAIM:/data")
    return problems
