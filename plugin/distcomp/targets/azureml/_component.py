"""A ComponentSpec as an azure-ai-ml v2 command component (a YAML mapping).

Pure: nothing here imports azure-ai-ml. The launcher's native mapping on platform ``azureml``
says how its ranks start (``distribution``; without one, distcomp's node agent starts them; a
plan of one bare process, ``Topology.plain``, is a command job without distribution); the node
count becomes ``resources.instance_count``.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...base.redact import is_secret
from ...spec import ComponentSpec, EnvironmentSpec, InputSpec, OutputSpec, is_uri
from ...spec._types import V2_PORT_NAMES
from ._command import azure_command
from ._errors import AzureMLTargetError

if TYPE_CHECKING:
    from ...core.plugins import PluginManager
    from ...records import Plan, Topology


SCHEMA = "https://azuremlschemas.azureedge.net/latest/commandComponent.schema.json"
# Azure ML's base image for inline environments that only give a conda file
BASE_IMAGE = "mcr.microsoft.com/azureml/openmpi4.1.0-ubuntu22.04:latest"
# what a command component's resources may hold besides instance_count
_RESOURCES = ("instance_type", "shm_size", "docker_args", "properties", "locations")
_NAME_OK = re.compile(r"^[a-z][a-z0-9_]*\Z")
# the modes azure-ai-ml's component output schema takes (its SUPPORTED_INPUT_OUTPUT_MODES)
_MODES = ("rw_mount", "upload", "direct", "mount", "ro_mount", "download", "eval_mount", "eval_download", "link")


@dataclass(frozen=True)
class Compiled:
    """The component mapping, and what the user should know about the translation."""

    component: dict[str, Any]
    notes: tuple[str, ...] = ()


def azure_name(name: str) -> str:
    """A name Azure ML accepts: lowercase letters, digits and '_', starting with a letter."""
    out = re.sub(r"[^a-z0-9_]", "_", name.lower())
    return out if _NAME_OK.match(out) else f"c_{out}"


def component_mapping(plan: "Plan", base_dir: Path, pm: "PluginManager", *,
                      environment: str | None = None, image: str | None = None) -> Compiled:
    """The command component for the job of ``plan`` (the core's) as a file in ``base_dir``
    would hold it (``code`` is relative to it). ``environment`` (``azureml:NAME:VERSION``) or
    ``image`` replace the spec's environment."""
    from ...core.kinds import AZUREML
    from ...core.plan import job_env, plain_env
    from ._distribution import distribution as native_distribution

    spec = plan.spec
    notes: list[str] = []
    name = azure_name(spec.name)
    if name != spec.name:
        notes.append(f"name {spec.name!r} is {name!r} on Azure ML (lowercase letters, digits and '_')")
    agent: dict[str, Any] | None = None  # the node record, for a launcher with no distribution of its own
    distribution: dict[str, Any] | None = None  # none: a plain command job, one process on one instance
    plain: dict[str, str] = {}  # that process's own variables
    mapping = pm.native_mapping(AZUREML, plan.launcher)
    if mapping is not None:
        distribution = native_distribution(mapping, plan)
    elif plan.topology.plain:  # one bare process: what Azure ML runs without a distribution
        plain = plain_env(plan.topology)
    else:
        distribution, agent = _agent_distribution(spec, plan.topology, name)
        notes.append(f"launcher {plan.launcher!r} has no Azure ML distribution of its own: each of the "
                     f"{spec.distribution.nodes} instance(s) runs distcomp's node agent (pytorch distribution, one "
                     "process per instance), which starts that node's processes as the launcher lays them out")
    doc: dict[str, Any] = {"$schema": SCHEMA, "type": "command", "name": name}
    if spec.version:
        doc["version"] = spec.version
    for key, value in (("display_name", spec.display_name), ("description", spec.description)):
        if value:
            doc[key] = value
    if spec.tags:
        doc["tags"] = {str(k): str(v) for k, v in spec.tags.items()}
    if spec.is_deterministic is not None:
        doc["is_deterministic"] = spec.is_deterministic
    if spec.inputs:
        doc["inputs"] = {n: _input(i, notes) for n, i in spec.inputs.items()}
    if spec.outputs:
        doc["outputs"] = {n: _output(o, notes) for n, o in spec.outputs.items()}
    code = _code(spec, base_dir, notes)
    if code is not None:
        doc["code"] = code
    doc["command"] = azure_command(spec.command)
    if agent is not None:
        from ...core.agentboot import boot_line

        doc["command"] = boot_line(agent, doc["command"])
    spec_dir = spec.source.parent if spec.source is not None else spec.code
    doc["environment"] = _environment(spec.environment, environment, image, base_dir, spec_dir, notes)
    variables = {**plain, **job_env(spec)}  # with distcomp's rank defaults, as every target's ranks
    if agent is None and distribution is not None:  # (the node agent's record gives each replica its role's)
        from ._roles import role_settings

        job_image = doc["environment"].get("image") if isinstance(doc["environment"], dict) else None
        prelude, everyone, more = role_settings(plan, distribution, job_image)
        doc["command"], variables = prelude + doc["command"], {**variables, **everyone}
        notes += more
    secret = sorted(k for k, v in variables.items() if is_secret(k) and v)
    if secret:
        variables = {k: v for k, v in variables.items() if k not in secret}
        notes.append(f"environment variable(s) {', '.join(secret)}: left out (a secret-named value is never written "
                     "in clear into a component); set them when the job is submitted (its environment_variables)")
    if variables:
        doc["environment_variables"] = variables
    if distribution is not None:
        doc["distribution"] = distribution
    if plan.own is not None and plan.own.once and distribution is not None and agent is None:
        raise AzureMLTargetError(_nested(plan.own.program, distribution, spec.distribution.nodes))
    resources: dict[str, Any] = {"instance_count": plan.topology.nodes}
    resources.update({k: spec.resources[k] for k in _RESOURCES if k in spec.resources})
    dropped = sorted(k for k in spec.resources if k not in _RESOURCES and k != "instance_count")
    if dropped:
        notes.append(f"resources {', '.join(dropped)} have no Azure ML equivalent and were left out")
    doc["resources"] = resources
    if spec.successful_return_code != "Zero":
        notes.append("successful_return_code ZeroOrGreater has no Azure ML equivalent: a non-zero exit fails there")
    return Compiled(doc, tuple(notes))


def _agent_distribution(spec: ComponentSpec, topology: "Topology", name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """Azure ML's pytorch distribution with one process per instance, that process the node
    agent: Azure gives each NODE_RANK, MASTER_ADDR and MASTER_PORT, and no other node's address,
    so a layout that names one cannot run there (said now, not on the cluster)."""
    from ...core.agentjob import Platform, node_record
    from ...records import placeholders

    texts = [t for r in topology.replicas for t in (*r.argv, *r.env.values())] + list(topology.files.values())
    others = sorted({f"{k}:{a}" for t in texts for k, a in placeholders(t) if k in ("host", "node") and a != "0"})
    if others:
        raise AzureMLTargetError(f"launcher {topology.launcher!r} has no Azure ML distribution, and its layout needs "
                                 f"{', '.join(others)} (another node's address), which Azure ML gives no process; "
                                 "a plugin gives the launcher one through the distcomp_native_mappings hook "
                                 "(NativeMapping(launcher, 'azureml', TYPE))")
    values = {f"port:{p}": str(29510 + i) for i, p in enumerate(topology.ports)}
    if topology.ports:
        values.pop(f"port:{topology.ports[0]}")
    bind = {"host:0": "MASTER_ADDR", "node:0": "MASTER_ADDR",
            **({f"port:{topology.ports[0]}": "MASTER_PORT"} if topology.ports else {})}
    # Azure's pytorch distribution gives each (one per instance) process the instance's rank
    task = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE")  # NODE_RANK is true of every replica
    platform = Platform(node_env=("NODE_RANK",), values=values, bind_env=bind, cwd=".", console=True, task_env=task)
    command = ["/bin/bash", "-c", "true"]  # replaced by the component's command, read from stdin
    record = node_record(topology, command, {}, platform, job=name,
                         zero_or_greater=spec.successful_return_code != "Zero")
    return {"type": "pytorch", "process_count_per_instance": 1}, record


def _input(spec: InputSpec, notes: list[str]) -> dict[str, Any]:
    if spec.is_port:
        kind = spec.type.lower() if spec.type.lower() in V2_PORT_NAMES else \
            ("uri_file" if spec.holds == "file" else "uri_folder")
        out: dict[str, Any] = {"type": kind}
        if spec.default is not None:  # Azure ML: "Non-primitive type Input has no default value"
            notes.append(f"input {spec.name!r}: its default {spec.default!r} was left out (an Azure ML component's "
                         "data input has none); give it in the pipeline or job")
    else:
        out = {"type": "string" if spec.type == "enum" else spec.type}
        if spec.enum:
            out["enum"] = list(spec.enum)
        if spec.default is not None and is_secret(spec.name):  # the one rule: a component is a file anyone reads
            notes.append(f"input {spec.name!r}: its default was left out (a secret-named value is never written in "
                         "clear into a component); give its value when the job is submitted")
        elif spec.default is not None:
            out["default"] = spec.default
        for key in ("min", "max"):
            if getattr(spec, key) is not None:
                out[key] = getattr(spec, key)
    if spec.optional:
        out["optional"] = True
    if spec.description:
        out["description"] = spec.description
    return out


def _nested(program: str, distribution: dict[str, Any], nodes: int) -> str:
    """Why a command that starts every rank itself (``mpirun -np 16 ...``: the launcher's
    ``once``) cannot run under an Azure ML distribution: Azure starts the command once per
    process it places, under its own mpirun for ``mpi``, and takes no head-node launcher in the
    command (its documentation), so every copy would start the whole world again."""
    kind = distribution["type"]
    if kind == "tensorflow":
        copies = int(distribution.get("worker_count") or 1) + int(distribution.get("parameter_server_count") or 0)
    else:
        copies = nodes * int(distribution.get("process_count_per_instance") or 1)
    how = "under an mpirun of its own" if kind == "mpi" else "itself"
    return (f"the command starts every rank itself with {program}, and Azure ML's {kind} distribution starts the "
            f"command {how} {copies} time(s) ({nodes} instance(s)), so {program} would run {copies} times, each "
            f"starting the whole job (Azure ML takes no head-node launcher such as {program} in the command); drop "
            f"{program} and its flags from the command, leaving the program it starts (e.g. python train.py ...): "
            f"the {kind} distribution then starts the ranks itself")


def _output(spec: OutputSpec, notes: list[str]) -> dict[str, Any]:
    """A component's output: its type, description and mode; its path is the job's to give."""
    kind = spec.type.lower() if spec.type.lower() in V2_PORT_NAMES else \
        ("uri_file" if spec.holds == "file" else "uri_folder")
    out: dict[str, Any] = {"type": kind}
    if spec.description:
        out["description"] = spec.description
    if spec.mode and spec.mode.lower() in _MODES:
        out["mode"] = spec.mode.lower()
    elif spec.mode:
        notes.append(f"output {spec.name!r}: its mode {spec.mode!r} was left out (Azure ML's modes: "
                     f"{', '.join(_MODES)})")
    if spec.path:  # azure-ai-ml's component output schema has type, description and mode, no path
        notes.append(f"output {spec.name!r}: its path {spec.path} was left out (an Azure ML component's output has "
                     f"no path; Azure ML picks one in the default datastore): give it as outputs.{spec.name}.path of "
                     "the job or pipeline step that uses the component")
    return out


def _code(spec: ComponentSpec, base_dir: Path, notes: list[str]) -> str | None:
    """The code folder relative to the component file; a missing one is left out (Azure ML
    refuses a path that does not exist) with a note, since compiling needs no code."""
    if not spec.code.is_dir():
        notes.append(f"code folder {spec.code} does not exist: the component has no code; "
                     "add it before submitting")
        return None
    rel = os.path.relpath(spec.code, base_dir)
    return rel if rel.startswith("..") or rel == "." else f"./{rel}"


def _environment(env: EnvironmentSpec | None, environment: str | None, image: str | None,
                 base_dir: Path, spec_dir: Path, notes: list[str]) -> str | dict[str, Any]:
    """A registered environment as ``azureml:NAME:VERSION``, an environment file as ``file:PATH``,
    a Docker context as ``build:``, an image as an inline one; local paths relative to ``base_dir``."""
    if environment:
        return environment if environment.startswith("azureml:") else f"azureml:{environment}"
    if image:
        return {"image": image}
    if env is None:
        raise AzureMLTargetError("the spec names no environment, and an Azure ML component needs one: add "
                                 "environment: to the spec, or give --environment azureml:NAME:VERSION or "
                                 "--image IMAGE")
    if env.reference and env.reference.startswith("file:"):  # an environment YAML beside the spec
        return "file:" + _local(env.reference[len("file:"):], "environment file", base_dir, spec_dir, file=True)
    if env.reference:
        return env.reference
    build = env.build  # a Docker build context
    if build:
        context = dict(build)
        if not is_uri(context["path"]):
            context["path"] = _local(context["path"], "environment build context", base_dir, spec_dir, file=False)
        dropped = [k for k, v in (("image", env.image), ("conda_file", env.conda_file or env.conda)) if v]
        if dropped:
            notes.append(f"the environment builds its image from {build['path']!r}: its {' and '.join(dropped)} "
                         "were left out (Azure ML takes build: or image:, and the Dockerfile installs the rest)")
        return {"build": context}
    if env.name and not env.image:
        return f"azureml:{env.name}:{env.version}" if env.version and env.version != "latest" \
            else f"azureml:{env.name}@latest"
    inline: dict[str, Any] = {"image": env.image or BASE_IMAGE}
    if not env.image:
        notes.append(f"the environment gives no image: Azure ML's base image {BASE_IMAGE} is used")
    if env.conda_file:
        inline["conda_file"] = os.path.relpath(spec_dir / env.conda_file, base_dir)
    elif env.conda:
        inline["conda_file"] = dict(env.conda)
    return inline


def _local(written: str, what: str, base_dir: Path, spec_dir: Path, *, file: bool) -> str:
    """``written`` (relative to the spec) relative to the compiled file's folder; it must exist,
    as azure-ai-ml refuses a local path that does not."""
    path = spec_dir / written
    if not (path.is_file() if file else path.is_dir()):
        raise AzureMLTargetError(f"the {what} {written!r} does not exist (resolved to {path}): "
                                 f"create it beside the spec, or give --environment azureml:NAME:VERSION or --image IMAGE")
    return os.path.relpath(path, base_dir)
