"""Dialect 3: the ``distributed:`` job draft (seed 003).

``distributed: {mpi|pytorch|tensorflow: {worker: {count, slots_per, resources},
launcher: {resources}, parameter_server: {count, environment, environment_variables}}}``.
Worker count is the node count (TensorFlow: the worker count); ``slots_per`` is processes per
node. Per-role settings are kept as RoleSpecs for the targets that can use them.
"""

from __future__ import annotations

from typing import Any, Mapping

from ._build import (Context, as_count, as_map, as_str, check_names, default_name, job_inputs, make_code,
                     make_environment, make_output, parse_command, string_map)
from ._diagnostics import did_you_mean
from ._dialect_v2 import _inputs as v2_inputs
from ._fields import CODE, COMPONENT_NAME, ENV_VARS, ENVIRONMENT, TAGS, TEXT, VERSION, ports
from ._model import ComponentSpec, Distribution, RoleSpec, frozen_map
from ._schema import NAME_RE, Anything, Int, MapOf, Obj, Scalar, Str, Union
from ._types import BUILTIN_LAUNCHERS, TENSORFLOW, V2_PORT_NAMES, canonical_launcher, describe_launchers

ROLES = ("worker", "launcher", "parameter_server", "chief", "evaluator")


def _role() -> Obj:
    return Obj({
        "count": Int("Replicas of this role.", minimum=0),
        "slots_per": Int("Processes per replica (MPI slots).", minimum=1),
        "resources": Anything("Resource requests/limits, e.g. {limits: {cpu: 1}}."),
        "resource_limits": Anything("Resource limits, e.g. {gpu: 4, memory: 2Gi}."),
        "environment": ENVIRONMENT,
        "environment_variables": ENV_VARS,
    }, description="Settings of one role.")


def schema(launchers: Mapping[str, str] = BUILTIN_LAUNCHERS) -> Obj:
    framework = Obj({**{role: _role() for role in ROLES}, "resource_limits": Anything()},
                    description="Roles of this framework's job.")
    compute = Obj({"infrastructure": Str(), "instance_type": Str(), "target": Str(), "type": Str(),
                   "instance_count": Int(minimum=1), "node_count": Int(minimum=1)}, description="Where the job runs.")
    return Obj({
        "$schema": Str(), "name": COMPONENT_NAME, "version": VERSION, "display_name": TEXT, "description": TEXT,
        "tags": TAGS, "command": Str("The command; $VARS come from the launcher's environment."),
        "code": CODE, "environment": ENVIRONMENT, "environment_variables": ENV_VARS, "compute": compute,
        "inputs": MapOf(v2_inputs(), key_pattern=NAME_RE, key_what="input name"),
        "outputs": MapOf(Union((Obj(ports(V2_PORT_NAMES, {"mode": Str(), "path": Str(), "description": TEXT})), Scalar()),
                               expected="a mapping with type:"), key_pattern=NAME_RE, key_what="output name"),
        "distributed": MapOf(framework, "Exactly one framework: mpi, pytorch or tensorflow.", key_what="framework"),
    }, required=("command", "distributed"), description="A distributed job (draft dialect).")


def _role_spec(name: str, raw: dict[str, Any]) -> RoleSpec:
    resources = dict(as_map(raw.get("resources")))
    if "resource_limits" in raw:
        resources["limits"] = raw["resource_limits"]
    return RoleSpec(name, as_count(raw.get("count")), frozen_map(resources),
                    make_environment(raw.get("environment")), string_map(raw.get("environment_variables")))


def build(ctx: Context, data: dict[str, Any]) -> ComponentSpec | None:
    raw_inputs, raw_outputs = as_map(data.get("inputs")), as_map(data.get("outputs"))
    inputs = job_inputs(ctx, raw_inputs)
    outputs = {n: make_output(n, v, "uri_folder") for n, v in raw_outputs.items()}
    check_names(ctx, raw_inputs, raw_outputs, ("inputs",), ("outputs",))
    command = parse_command(ctx, data.get("command"), "v2", ("command",), inputs, outputs, raw_inputs)
    frameworks = as_map(data.get("distributed"))
    kind = None
    if isinstance(data.get("distributed"), dict) and len(frameworks) != 1:
        ctx.problems.add(("distributed",), "exactly one framework is needed",
                         expected="one of: mpi, pytorch, tensorflow", got=", ".join(frameworks) or "none", at_key=True)
    elif frameworks:
        (fw_name, fw), = frameworks.items()
        kind = canonical_launcher(fw_name, ctx.launchers)
        if kind is None:
            ctx.problems.add(("distributed", fw_name), f"unknown launcher '{fw_name}'",
                             expected=describe_launchers(ctx.launchers), hint=did_you_mean(fw_name, ctx.launchers),
                             at_key=True)
    code = make_code(ctx, data.get("code"), ("code",))
    if command is None or kind is None or ctx.problems.errors:
        return None
    fw = as_map(frameworks[fw_name])
    roles = tuple(_role_spec(name, as_map(fw[name])) for name in ROLES if name in fw)
    worker = as_map(fw.get("worker"))
    compute = as_map(data.get("compute"))
    count = as_count(worker.get("count")) or 1
    nodes = as_count(compute.get("instance_count")) or as_count(compute.get("node_count"))
    workers = ps = None
    if kind == TENSORFLOW:
        workers, nodes = count, nodes or count
        ps = as_count(as_map(fw.get("parameter_server")).get("count")) or 0
        ppn = max(1, workers // nodes)
    else:
        nodes = nodes or count
        ppn = as_count(worker.get("slots_per"))
    return ComponentSpec(
        name=as_str(data.get("name")) or default_name(ctx.file), command=command, code=code,
        distribution=Distribution(kind, nodes, ppn, workers, ps or 0, roles),
        version=as_str(data.get("version")), display_name=as_str(data.get("display_name")),
        description=as_str(data.get("description")), tags=string_map(data.get("tags")),
        inputs=frozen_map(inputs), outputs=frozen_map(outputs),
        environment=make_environment(data.get("environment")),
        environment_variables=string_map(data.get("environment_variables")),
        resources=frozen_map(compute),
    )
