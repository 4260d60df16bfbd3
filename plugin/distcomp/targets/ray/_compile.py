"""What a Ray job is before it is submitted (pure): the Jobs API request (entrypoint, runtime_env,
submission id), the placement bundles, the outputs' paths, and the node agents' record.

Nothing in it depends on the launcher: the Plan's Topology is the whole contract, bound on the
cluster by the driver (``_driver``): ``{{host:N}}``/``{{node:N}}`` is bundle N's node address,
``{{port:NAME}}`` a port free on every node (``agentjob.bind_names``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

from ...agent.sysmetrics import entry as sysmetrics_entry
from ...agent.hang import entry as hang_entry
from ...core.agentjob import Platform, node_record
from ...delivery.conda import conda_pip
from ...errors import JobError, UsageError
from ...core.target import JOB_NAME, Compiled
from .._secrets import NAME as SECRETS
from ._bundles import bundle

if TYPE_CHECKING:
    from ...core.plan import Plan
    from ...spec import ComponentSpec

PACKAGE = "distcomp_ray"  # what travels as runtime_env.py_modules: the node agent and the driver
ENTRYPOINT = "-m " + PACKAGE + ".driver"
# what the code folder never needs on the cluster (Ray honours .gitignore itself)
EXCLUDES = [".git", ".venv", "__pycache__", "runs", "mlruns", "mlflow.db", ".mypy_cache", ".pytest_cache",
            ".ruff_cache"]
# Ray's own cap on an uploaded package (GCS_STORAGE_MAX_SIZE in Ray 2.x)
SIZE_LIMIT = "512 MiB"
# how the agent learns its node and its node's name (the driver sets them per node)
PLATFORM = dict(node_env=("DISTCOMP_RAY_NODE_INDEX",), node_name_env=("DISTCOMP_RAY_NODE_NAME",), console=True,
                grace=2.0)


def output_problems(spec: "ComponentSpec", given: Mapping[str, str]) -> list[str]:
    """Why the outputs' paths, which every node must see, will not do: one line each, saying what to do."""
    from ...spec import unknown_outputs

    problems = unknown_outputs(spec, given)
    problems += [f"output '{name}' would be lost: the ranks write on the Ray cluster's nodes and nothing brings it "
                 f"back; give --output {name}=PATH, a path every node sees (a shared file system)"
                 for name in spec.outputs if name not in given]
    problems += [f"--output {name}={path}: give an absolute path that every node sees"
                 for name, path in given.items() if name in spec.outputs and not Path(path).is_absolute()]
    return problems


def refuse(plan: "Plan") -> None:
    """A Topology whose first process reaches the other nodes itself (mpirun over ssh): a Ray
    cluster gives it no way in, so such a job is refused here."""
    t = plan.topology
    empty = [n for n in range(t.nodes) if not any(r.node == n for r in t.replicas)]
    if empty:
        raise UsageError(f"launcher {plan.launcher!r} on {t.nodes} nodes starts no process of its own on node "
                         f"{empty[0]}: its first process reaches the other nodes itself (mpirun over ssh), which a "
                         "Ray cluster does not provide; run it on one node (--nodes 1), or use --target slurm")


def compile_job(plan: "Plan", options: Mapping[str, Any]) -> Compiled:
    """The Ray job of ``plan`` (the core's) with these options."""
    from ...base.redact import job_masker
    from ...spec import InputError, RenderError, check_inputs
    from ._client import python_of

    spec = plan.spec
    python_of(options)  # a bad --python before any other work
    outputs = dict(options.get("outputs") or {})
    values, problems = check_inputs(spec, dict(options.get("inputs") or {}), Path.cwd())
    problems = output_problems(spec, outputs) + problems
    if problems:
        raise InputError("\n".join(problems))
    try:
        argv = spec.render(values, outputs)
    except RenderError as exc:
        raise UsageError(str(exc)) from None
    one = bundle(spec, options)
    refuse(plan)
    masker = job_masker(spec, values)
    platform = Platform(secrets=SECRETS, **PLATFORM)  # type: ignore[arg-type]
    try:
        record = node_record(plan.topology, argv, dict(spec.environment_variables), platform, job=spec.name,
                             masker=masker, zero_or_greater=spec.successful_return_code == "ZeroOrGreater")
    except ValueError as exc:  # the launcher's Topology: its plugin's to fix
        raise JobError(f"launcher {plan.launcher!r} from {plan.provider}: {exc}") from None
    record.update(sysmetrics_entry(plan.system_metrics_interval))  # each node's agent samples its node
    record.update(hang_entry(plan.hang_timeout))  # each node's agent watches its ranks' beats (--hang-timeout)
    if not spec.code.is_dir():
        raise UsageError(f"{spec.ref}: its code folder {spec.code} does not exist")
    from ...base.ignore import patterns

    # Ray honours .gitignore itself; .distcompignore's rules join the excludes
    excludes = [*EXCLUDES, *patterns(spec.code, skip=frozenset(EXCLUDES))]
    runtime_env: dict[str, Any] = {"working_dir": str(spec.code), "excludes": excludes,
                                   "py_modules": [f"<{PACKAGE}: distcomp's node agent and this job's driver, made "
                                                  "when it is submitted>"]}
    conda = conda_pip(spec)
    packages = list(dict.fromkeys([*conda.pip, *(options.get("packages") or ())]))
    if packages:
        runtime_env["pip"] = packages
    holds = {n: "file" if spec.outputs[n].holds == "file" else "folder" for n in outputs}
    data: dict[str, Any] = {
        "submission_id": JOB_NAME, "entrypoint": f"{python_of(options)} {ENTRYPOINT}",
        "runtime_env": runtime_env,
        "placement_group": {"strategy": "STRICT_SPREAD", "bundles": [one] * plan.topology.nodes,
                            "wait_s": float(options.get("placement_timeout") or 300.0)},
        "outputs": {outputs[n]: holds[n] for n in outputs},
        "max_restarts": plan.max_restarts,
        "checkpoint_dir": str(options.get("checkpoint_dir") or ""),
        "node_record": record,
    }
    notes: tuple[str, ...] = (f"the code folder {spec.code} goes as the job's working_dir (.gitignore and "
                              f".distcompignore honoured; Ray refuses more than {SIZE_LIMIT})",)
    notes += conda.notes
    if conda.pip:
        notes += (f"{conda.where}: its pip packages go as the job's runtime_env pip (each node installs them in "
                  "a virtualenv of the job's)",)
    if conda.others:
        notes += (f"{conda.where} also asks conda for {', '.join(conda.others)}: runtime_env pip does not install "
                  "those; the cluster's Python must have them",)
    if plan.own is not None:
        notes += (f"the command brings its own launcher: {plan.own.describe()}",)
    if options.get("checkpoint_dir"):
        notes += (f"runtime.checkpoint_dir() of every rank: {options['checkpoint_dir']} (--checkpoint-dir), which "
                  "every node must see: it outlives the job's attempts",)
    elif plan.max_restarts:
        notes += ("warning: a restarted job resumes only from a checkpoint every node sees: give --checkpoint-dir "
                  "(without it runtime.checkpoint_dir() is ./checkpoint in each node's own working folder)",)
    late: tuple[str, ...] = (f"the job's name: {JOB_NAME} as the submission id",
            "the job's MLflow run, made when it is submitted: its env (MLFLOW_RUN_ID, MLFLOW_TRACKING_URI, ...) in "
            "the node record's env",
            "where Ray unpacks the code on each node: the node record's cwd; each node's address and free ports "
            "(DISTCOMP_HOST_N, DISTCOMP_PORT_I) in its agent's environment")
    if masker:
        late += (f"the job's secrets, in {SECRETS} beside the driver: the record names each by its index",)
    return Compiled(kind=f"Ray job of {spec.ref}", text=json.dumps(data, indent=1) + "\n", data=data, notes=notes,
                    late=late, native=masker)
