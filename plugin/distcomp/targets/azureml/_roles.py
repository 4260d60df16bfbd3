"""A job's per-role settings (the Plan's ``Topology.settings``) on Azure ML.

An Azure ML job has one environment, one set of variables and one instance type for all its
processes. What it does say per process is the role in ``TF_CONFIG`` (its tensorflow
distribution: ``worker`` or ``ps``, no chief; Azure's documented layout), so a role's own
variables are exported by the command itself on the processes of that role. A role's image
and resources have no place there: they are left out, with a note saying so.
"""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING, Any

from ._errors import AzureMLTargetError

if TYPE_CHECKING:
    from ...core.plan import Plan

# Azure's TF_CONFIG roles (its distribution has no chief or evaluator)
TF_ROLES = ("worker", "ps")


def role_settings(plan: "Plan", distribution: dict[str, Any],
                  job_image: str | None) -> tuple[str, dict[str, str], list[str]]:
    """The shell line that exports each role's variables where TF_CONFIG names that role ("" if
    none), the variables of a role that is every process (the job's then), and the notes on
    what Azure ML cannot hold."""
    notes: list[str] = []
    cases: list[str] = []
    everyone: dict[str, str] = {}
    ranked = {r.role for r in plan.topology.replicas if r.rank is not None}
    for role, own in plan.topology.settings.items():
        if own.image and own.image != job_image:
            notes.append(f"{own.source}: its image {own.image} was left out: Azure ML runs every process of a job in "
                         f"the job's environment{f' ({job_image})' if job_image else ''}")
        if own.resources:
            notes.append(f"{own.source}: its resources were left out: every Azure ML instance is the job's "
                         "instance_type (give resources.instance_type)")
        if not own.env:
            continue
        if distribution.get("type") == "tensorflow" and role in TF_ROLES:
            exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in own.env.items())
            # Azure writes TF_CONFIG's JSON with or without spaces after the colons
            cases.append(f"*'\"type\": \"{role}\"'*|*'\"type\":\"{role}\"'*) export {exports};;")
        elif ranked == {role} and distribution.get("type") != "tensorflow":  # every process plays it
            everyone.update(own.env)
        else:
            raise AzureMLTargetError(f"{own.source}.environment_variables: Azure ML's {distribution.get('type')} "
                                     f"distribution has no {role} process of its own (its roles: "
                                     f"{', '.join(TF_ROLES) if distribution.get('type') == 'tensorflow' else 'worker'})"
                                     "; move them to the job's environment_variables")
    if not cases:
        return "", everyone, notes
    return f'case "${{TF_CONFIG:-}}" in {" ".join(cases)} esac; ', everyone, notes
