"""Dialect 2: azure-ai-ml v2 ``type: command`` components and command jobs (seed 002).

``distribution: {type, process_count_per_instance | worker_count, parameter_server_count}``
and ``resources.instance_count`` give the topology; without ``distribution`` (a pipeline's
plain step) the command runs as one process on one node (``NO_LAUNCHER``). A job's ``inputs: {epochs: 1}`` are
literal values: each declares an input whose default is that value.
"""

from __future__ import annotations

from typing import Any, Mapping

from ._build import Context, as_count, as_map, assemble, default_name, read_parts, topology
from ._fields import CODE, COMPONENT_NAME, ENV_VARS, ENVIRONMENT, TAGS, TEXT, VERSION, ports
from ._model import ComponentSpec, frozen_map
from ._schema import NAME_RE, Anything, Bool, Int, ListOf, MapOf, Num, Obj, Scalar, Str, Tagged, Union
from ._types import NO_LAUNCHER, TENSORFLOW, V2_PARAMETER_NAMES, V2_PORT_NAMES, canonical_launcher

_PARAM = {"description": TEXT, "optional": Bool(), "default": Scalar(), "value": Scalar(), "enum": ListOf(Scalar()),
          "display_name": TEXT}
_NUMERIC = {**_PARAM, "min": Num(), "max": Num()}
_PORT = {"description": TEXT, "optional": Bool(), "path": Str("A path or data asset."), "default": Str(),
         "mode": Str(), "datastore": Str(), "display_name": TEXT}


def _inputs() -> Union:
    variants: dict[str, Obj] = {}
    for name in V2_PARAMETER_NAMES:
        fields = _NUMERIC if name in ("integer", "number") else _PARAM
        variants[name] = Obj({"type": Str(enum=(name,), case_insensitive=True), **fields})
    port = Obj(ports(V2_PORT_NAMES, _PORT))
    variants.update({name: port for name in V2_PORT_NAMES})
    # azure-ai-ml: a job's input without type: is a literal ({value: 3}) or a uri_folder ({path: ...})
    untyped = Obj({**_PORT, "value": Scalar("A job's literal input value.")},
                  description="A job's input without type: a uri_folder, or a literal value: (azure-ai-ml's defaults).")
    declared = Tagged("type", variants, "An input declaration.", what="input type", untagged=untyped)
    return Union((Scalar("A job's literal input value."), declared), "An input: a declaration or a job's literal value.",
                 expected="a value or a mapping with type:")


def _distribution(launchers: Mapping[str, str]) -> Tagged:
    per_instance = Int("Processes per node.", minimum=1)
    variants: dict[str, Obj] = {}
    for name, canonical in sorted(launchers.items()):
        if canonical == TENSORFLOW:
            fields = {"worker_count": Int("Total workers.", minimum=1),
                      "parameter_server_count": Int("Parameter servers.", minimum=0)}
        else:
            fields = {"process_count_per_instance": per_instance}
        variants[name] = Obj({"type": Str(enum=(name,), case_insensitive=True), **fields})
    return Tagged("type", variants, "How the ranks are started.", what="distribution type")


def _compute_hint(value: Any) -> str:
    """Seed 002 writes ``compute: {node_count: 2}``; azure-ai-ml takes the compute's name there."""
    count = value.get("node_count", value.get("instance_count")) if isinstance(value, dict) else None
    nodes = count if isinstance(count, int) and not isinstance(count, bool) else "N"
    return (f"compute names the compute target (compute: azureml:NAME); give the node count as "
            f"resources: {{instance_count: {nodes}}}")


def schema(launchers: Mapping[str, str]) -> Obj:
    outputs = Union((Obj(ports(V2_PORT_NAMES, {"mode": Str(), "path": Str(), "description": TEXT, "name": Str(),
                                               "version": VERSION, "display_name": TEXT})), Scalar()),
                    expected="a mapping with type:")
    resources = Obj({"instance_count": Int("Nodes.", minimum=1), "instance_type": Str(), "shm_size": Str(),
                     "docker_args": Str(), "locations": ListOf(Str()), "properties": Anything(),
                     "max_instance_count": Int(minimum=1)}, description="Compute resources.")
    return Obj({
        "$schema": Str(), "type": Str(enum=("command",), case_insensitive=True, what="component type"),
        "name": COMPONENT_NAME, "version": VERSION, "display_name": TEXT, "description": TEXT, "tags": TAGS,
        "is_deterministic": Bool(), "inputs": MapOf(_inputs(), key_pattern=NAME_RE, key_what="input name"),
        "outputs": MapOf(outputs, key_pattern=NAME_RE, key_what="output name"),
        "command": Str("The command, with ${{inputs.x}}, ${{outputs.y}} and $[[optional blocks]]."),
        "code": CODE, "environment": ENVIRONMENT, "environment_variables": ENV_VARS,
        "distribution": _distribution(launchers), "resources": resources,
        "compute": Str("The compute target's name.", type_hint=_compute_hint), "experiment_name": Str(), "limits": Anything(), "services": Anything(),
        "identity": Anything(), "properties": Anything(), "queue_settings": Anything(),
        "additional_includes": ListOf(Str()),
    }, required=("command",), description="An azure-ai-ml command component or job.")


def build(ctx: Context, data: dict[str, Any]) -> ComponentSpec | None:
    parts = read_parts(ctx, data, dialect="v2", command_path=("command",), output_type="uri_folder")
    dist = as_map(data.get("distribution"))
    resources = as_map(data.get("resources"))
    if "distribution" not in data:  # a plain command (a pipeline's data-prep step): one process, one node
        kind: str | None = NO_LAUNCHER
        nodes = as_count(resources.get("instance_count"))
        if nodes is not None and nodes > 1:
            ctx.problems.add(("resources", "instance_count"), f"{nodes} nodes without a distribution",
                             expected="distribution: {type: pytorch | mpi | tensorflow, ...}",
                             hint="a command without distribution runs as one process on one node; say how the "
                                  "ranks start, or drop instance_count")
    else:
        kind = canonical_launcher(dist["type"], ctx.launchers) if isinstance(dist.get("type"), str) else None
    if parts.command is None or kind is None or ctx.problems.errors:
        return None
    ps = dist.get("parameter_server_count")
    topo = topology(kind, as_count(resources.get("instance_count")) or 1, as_count(dist.get("process_count_per_instance")),
                    as_count(dist.get("worker_count")), ps if isinstance(ps, int) else 0)
    given = data.get("name")
    name = given if isinstance(given, str) else default_name(ctx.file)
    # azure-ai-ml resolves a job's relative ``path: ./data`` from the YAML's folder, not the shell's
    return assemble(data, parts, name, topo, resources=frozen_map(resources), paths_base=ctx.base_dir)
