"""Dialect 1: the Component SDK ``type: DistributedComponent`` (seeds 000/001).

Its schema is the one ``distcomp schema`` prints. Beyond Azure's keys it accepts, under
``launcher:``, the counts Azure sets at submit time (``node_count``,
``process_count_per_node``, ``worker_count``, ``parameter_server_count``), ``max_restarts``, and a top-level
``environment_variables``, so a spec can say how it runs by default.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

from ._build import Context, as_count, as_map, assemble, read_parts, topology
from ._fields import CODE, COMPONENT_NAME, ENV_VARS, ENVIRONMENT, TAGS, TEXT, VERSION, ports
from ._model import ComponentSpec
from ._schema import NAME_RE, Bool, Int, ListOf, MapOf, Node, Num, Obj, Scalar, Str, Tagged
from ._types import V1_PORT_NAMES, canonical_launcher, describe_launchers

TYPE = "DistributedComponent"
# azure-ai-ml reads ``NAME@LABEL`` as the type NAME with a label; 1-legacy is the v1 command mode
TYPES = (TYPE, f"{TYPE}@1-legacy")
SCHEMA_URL = "https://componentsdk.azureedge.net/jsonschema/DistributedComponent.json"

_PARAM_COMMON = {"description": TEXT, "optional": Bool("Whether the input may be left unset."),
                 "default": Scalar("The value used when none is given."), "display_name": TEXT}
_NUMERIC = {**_PARAM_COMMON, "min": Num("Smallest allowed value."), "max": Num("Largest allowed value.")}


def _param(name: str, fields: dict[str, Node], required: tuple[str, ...] = ()) -> Obj:
    return Obj({"type": Str(enum=(name,), case_insensitive=True), **fields}, required=required)


def _inputs() -> Tagged:
    variants: dict[str, Obj] = {
        "String": _param("String", _PARAM_COMMON),
        "Integer": _param("Integer", _NUMERIC),
        "Float": _param("Float", _NUMERIC),
        "Boolean": _param("Boolean", _PARAM_COMMON),
        "Enum": _param("Enum", {"enum": ListOf(Scalar(), "The allowed values."), **_PARAM_COMMON}, ("enum",)),
    }
    port = Obj(ports(V1_PORT_NAMES, {"description": TEXT, "optional": Bool(), "display_name": TEXT,
                                     "is_resource": Bool(), "datastore_mode": Str()}, lists=True))
    variants.update({name: port for name in V1_PORT_NAMES})
    return Tagged("type", variants, "An input: a parameter (String, Integer, Float, Boolean, Enum) or a port (path, "
                  "AnyDirectory, AnyFile, ..., or a list of them such as [AnyFile, AnyDirectory]).",
                  what="input type", lists="port types such as [AnyFile, AnyDirectory]")


def schema(launchers: Mapping[str, str]) -> Obj:
    """The whole DistributedComponent dialect for a given launcher table."""
    outputs = Obj(ports(V1_PORT_NAMES, {"description": TEXT, "is_link_mode": Bool(), "datastore_mode": Str(),
                                        "display_name": TEXT}), required=("type",))
    launcher = Obj({
        "type": Str("The launcher: how the ranks are started.", enum=tuple(sorted(launchers)),
                    case_insensitive=True, what="launcher", expected=describe_launchers(launchers)),
        "additional_arguments": Str("The command each rank runs, with {inputs.x}, {outputs.y} and [optional blocks]."),
        "node_count": Int("Nodes (default 1; overridable with --nodes).", minimum=1),
        "process_count_per_node": Int("Processes per node (overridable with --nproc-per-node).", minimum=1),
        "worker_count": Int("TensorFlow: total workers (default nodes x processes per node).", minimum=1),
        "parameter_server_count": Int("TensorFlow: parameter servers (default 0).", minimum=0),
        "max_restarts": Int("How many times a failed job starts again, every rank on every node (default 0; "
                            "overridable with --max-restarts). A preemption or requeue is no failure.", minimum=0),
        "system_metrics": Bool("Log every node's CPU, memory, disk, network (and GPU) metrics to the job's run as "
                               "system/<node>/... (default true; --no-system-metrics)."),
        "system_metrics_interval": Num("Seconds between two samples of each node's system metrics (default 10; "
                                       "--system-metrics-interval).", minimum=0.1),
        "hang_timeout": Num("End the job, with each rank's stack, when no rank has made progress for this many "
                            "seconds (default: off; --hang-timeout).", minimum=1),
    }, required=("type", "additional_arguments"), description="How the distributed job starts.")
    return Obj({
        "$schema": Str("The schema this file follows."),
        "name": COMPONENT_NAME,
        "version": VERSION,
        "display_name": TEXT,
        "type": Str("DistributedComponent (or DistributedComponent@1-legacy).", enum=TYPES, case_insensitive=True,
                    what="component type"),
        "description": TEXT,
        "tags": TAGS,
        "is_deterministic": Bool("Whether the same inputs always give the same outputs."),
        "inputs": MapOf(_inputs(), "Inputs by name.", key_pattern=NAME_RE, key_what="input name"),
        "outputs": MapOf(outputs, "Outputs by name.", key_pattern=NAME_RE, key_what="output name"),
        "launcher": launcher,
        "environment": ENVIRONMENT,
        "environment_variables": ENV_VARS,
        "code": CODE,
        "successful_return_code": Str(enum=("Zero", "ZeroOrGreater"), what="return code policy"),
    }, required=("name", "type", "launcher"), description="A distcomp / Component SDK DistributedComponent.")


def build(ctx: Context, data: dict[str, Any]) -> ComponentSpec | None:
    parts = read_parts(ctx, data, dialect="v1", command_path=("launcher", "additional_arguments"), output_type="path")
    launcher = as_map(data.get("launcher"))
    kind = canonical_launcher(launcher["type"], ctx.launchers) if isinstance(launcher.get("type"), str) else None
    name = data.get("name")
    if parts.command is None or kind is None or not isinstance(name, str) or ctx.problems.errors:
        return None
    ps = launcher.get("parameter_server_count")
    dist = topology(kind, as_count(launcher.get("node_count")) or 1, as_count(launcher.get("process_count_per_node")),
                    as_count(launcher.get("worker_count")), ps if isinstance(ps, int) else 0)
    restarts = launcher.get("max_restarts")
    if isinstance(restarts, int) and not isinstance(restarts, bool):
        dist = dataclasses.replace(dist, max_restarts=restarts)
    watch = {k: launcher[k] for k in ("system_metrics", "system_metrics_interval", "hang_timeout") if k in launcher}
    if watch:  # the schema has checked their types
        dist = dataclasses.replace(dist, **watch)
    return assemble(data, parts, name, dist, successful_return_code=data.get("successful_return_code", "Zero"))
