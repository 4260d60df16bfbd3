"""Azure ML's distribution and instance count follow the job's Topology, not the spec's nodes x
processes: a plugin launcher lays a 1 x 1 spec out on 2 nodes x 3 processes
(tests/targets/_layout_plugin.py), and its component asks for 2 instances of 3 processes."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from distcomp.core.plan import make_plan
from distcomp.spec import loads
from distcomp.targets.azureml._component import AzureMLTargetError, component_mapping

from .._layout_plugin import NODES, PER_NODE, plugins, spec_text


def component(launcher: str, tmp_path: Path) -> dict[str, object]:
    pm = plugins()
    spec = loads(spec_text(launcher), launchers=pm.alias_table())
    assert (spec.distribution.nodes, spec.distribution.processes_per_node) == (1, 1)  # what the spec says
    return dict(component_mapping(make_plan(spec, gpu=False, pm=pm), tmp_path, pm, environment="azureml:x:1").component)


@pytest.mark.parametrize("launcher, kind", [("wide", "pytorch"), ("wide-mpi", "mpi")])
def test_each_instance_runs_the_topologys_processes_per_node(launcher: str, kind: str, tmp_path: Path) -> None:
    doc = component(launcher, tmp_path)
    assert doc["distribution"] == {"type": kind, "process_count_per_instance": PER_NODE}
    assert doc["resources"] == {"instance_count": NODES}


def test_a_tensorflow_distribution_counts_the_topologys_tasks(tmp_path: Path) -> None:
    doc = component("wide-tf", tmp_path)
    assert doc["distribution"] == {"type": "tensorflow", "worker_count": 5, "parameter_server_count": 2}


def test_a_layout_of_uneven_nodes_is_refused() -> None:
    """Azure starts process_count_per_instance on every instance: 4 + 2 processes cannot be said."""
    from distcomp.core.kinds import AZUREML
    from distcomp.targets.azureml._distribution import distribution

    from .._layout_plugin import wide

    pm = plugins()
    spec = loads(spec_text("wide"), launchers=pm.alias_table())
    plan = make_plan(spec, gpu=False, pm=pm)
    moved = tuple(replace(r, node=0) if r.rank == 3 else r for r in plan.topology.replicas)
    assert wide(spec).replicas[3].node == 1
    mapping = pm.native_mapping(AZUREML, "wide")
    assert mapping is not None
    with pytest.raises(AzureMLTargetError, match=r"\{0: 4, 1: 2\} process\(es\) by node"):
        distribution(mapping, replace(plan, topology=replace(plan.topology, replicas=moved)))
