"""Dialect 3: the ``distributed:`` job draft (seed 003).

``distributed: {mpi|pytorch|tensorflow: {worker: {count, slots_per, resources},
launcher: {resources}, parameter_server: {count, environment, environment_variables}}}``.
Worker count is the node count (TensorFlow: the worker count); ``slots_per`` is processes per
node, and an MPI worker's default is one per GPU (seed 003: "workers have defaults"). Per-role settings are kept as RoleSpecs for the targets that can use them.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping

from .instances import gpu_slots

from ._build import (Context, as_count, as_map, as_str, assemble, default_name, make_environment, read_parts,
                     string_map, topology)
from ._diagnostics import did_you_mean
from ._dialect_v2 import _inputs as v2_inputs
from ._fields import CODE, COMPONENT_NAME, ENV_VARS, ENVIRONMENT, TAGS, TEXT, VERSION, ports
from ._model import ComponentSpec, RoleSpec, frozen_map
from ._schema import NAME_RE, Anything, Int, MapOf, Obj, Scalar, Str, Union
from ._types import MPI, TENSORFLOW, V2_PORT_NAMES, canonical_launcher, describe_launchers

ROLES = ("worker", "launcher", "parameter_server", "chief", "evaluator")


def _role() -> Obj:
    return Obj({
        "count": Int("Replicas of this role.", minimum=0),
        "slots_per": Int("Processes per replica (MPI slots; an MPI worker's default: its GPUs, from its resources or "
                          "the instance_type).", minimum=1),
        "resources": Anything("Resource requests/limits, e.g. {limits: {cpu: 1}}."),
        "resource_limits": Anything("Resource limits, e.g. {gpu: 4, memory: 2Gi}."),
        "environment": ENVIRONMENT,
        "environment_variables": ENV_VARS,
    }, description="Settings of one role.")


def schema(launchers: Mapping[str, str]) -> Obj:
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


def _framework_limits(roles: tuple[RoleSpec, ...], limits: Any) -> tuple[RoleSpec, ...]:
    """``distributed: FRAMEWORK: resource_limits:`` as the worker role's limits, under what the
    worker role says itself (its own ``resource_limits``/``resources.limits`` win)."""
    if not any(r.name == "worker" for r in roles):
        roles = (*roles, RoleSpec("worker"))
    out = []
    for role in roles:
        if role.name == "worker":
            resources = dict(role.resources)
            own = resources.get("limits")
            resources["limits"] = {**as_map(limits), **as_map(own)} if isinstance(limits, dict) else own or limits
            role = replace(role, resources=frozen_map(resources))
        out.append(role)
    return tuple(out)


def build(ctx: Context, data: dict[str, Any]) -> ComponentSpec | None:
    parts = read_parts(ctx, data, dialect="v2", command_path=("command",), output_type="uri_folder")
    frameworks = as_map(data.get("distributed"))
    kind = None
    if isinstance(data.get("distributed"), dict) and len(frameworks) != 1:
        ctx.problems.add(("distributed",), "exactly one framework is needed",
                         expected="one of: mpi, pytorch, tensorflow", got=", ".join(frameworks) or "none", at_key=True)
    elif frameworks:
        fw_name = next(iter(frameworks))
        kind = canonical_launcher(fw_name, ctx.launchers)
        if kind is None:
            ctx.problems.add(("distributed", fw_name), f"unknown launcher '{fw_name}'",
                             expected=describe_launchers(ctx.launchers), hint=did_you_mean(fw_name, ctx.launchers),
                             at_key=True)
    if parts.command is None or kind is None or ctx.problems.errors:
        return None
    fw = as_map(frameworks[fw_name])
    roles = tuple(_role_spec(name, as_map(fw[name])) for name in ROLES if name in fw)
    if "resource_limits" in fw:  # the framework's own (seed 003's pytorch job): each node's, the workers'
        roles = _framework_limits(roles, fw["resource_limits"])
    count = as_count(as_map(fw.get("worker")).get("count")) or 1
    compute = as_map(data.get("compute"))
    nodes = as_count(compute.get("instance_count")) or as_count(compute.get("node_count"))
    if kind == TENSORFLOW:  # worker count is the TF worker count; nodes default to one per worker
        ps = as_count(as_map(fw.get("parameter_server")).get("count")) or 0
        topo = topology(kind, nodes or count, None, count, ps, roles)
    else:  # worker count is the node count; slots_per the processes per node
        slots, found = as_count(as_map(fw.get("worker")).get("slots_per")), None
        if slots is None and kind == MPI:  # "workers have defaults": a rank per GPU, as on Azure
            worker = next((r for r in roles if r.name == "worker"), None)
            found = gpu_slots(worker.resources if worker else {}, compute.get("instance_type"))
        topo = topology(kind, nodes or count, found[0] if found else slots, None, 0, roles)
        topo = replace(topo, slots_from=found[1] if found else None)
    name = as_str(data.get("name")) or default_name(ctx.file)
    # an Azure ML job draft: its relative ``path: ./data`` from the YAML's folder, as in v2
    return assemble(data, parts, name, topo, resources=frozen_map(compute), paths_base=ctx.base_dir)
