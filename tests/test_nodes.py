"""``distcomp.nodes_range`` and ``target_nodes``: ``--nodes N`` and the elastic ``MIN:MAX``
as records, and what a range means for a target (the real kubeflow and azureml targets)."""

from __future__ import annotations

import dataclasses

import pytest

import distcomp
from distcomp.errors import UsageError
from tests.targets.kubeflow._scratch import job_doc
from tests.targets.kubeflow.test_manifests import JOBS, validate


@pytest.mark.parametrize(("text", "expected"), [
    ("4", distcomp.NodeRange(4, 4, elastic=False)), (3, distcomp.NodeRange(3, 3, elastic=False)),
    ("2:4", distcomp.NodeRange(2, 4)), ("3:3", distcomp.NodeRange(3, 3, elastic=True)),
])
def test_a_count_or_a_range(text: str | int, expected: distcomp.NodeRange) -> None:
    found = distcomp.nodes_range(text)
    assert found == expected and str(found) == str(text)
    with pytest.raises(dataclasses.FrozenInstanceError):
        found.min = 1  # type: ignore[misc]


@pytest.mark.parametrize(("text", "said"), [
    ("0", "expected an integer >= 1, got '0'"), ("x", "expected an integer >= 1, got 'x'"),
    ("1:x", "expected an integer >= 1, got 'x'"), (":2", "expected an integer >= 1, got ''"),
    ("4:2", "'4:2': MIN:MAX with MIN <= MAX"), (True, "expected a node count N or MIN:MAX, got True"),
])
def test_what_is_no_count_is_a_usage_error(text: object, said: str) -> None:
    with pytest.raises(UsageError) as caught:
        distcomp.nodes_range(text)  # type: ignore[arg-type]
    assert str(caught.value) == said


@pytest.mark.slow
def test_a_range_becomes_the_targets_elastic_option_laid_out_for_max() -> None:
    bound = distcomp.target_nodes("kubeflow", "2:4", {"image": "i:1"})
    assert isinstance(bound, distcomp.TargetNodes)
    assert (bound.nodes, dict(bound.options)) == (4, {"image": "i:1", "elastic": "2:4"})
    compiled = distcomp.compile(JOBS / "torch" / "component.yaml", "kubeflow", nodes=bound.nodes, scratch=["result"],
                                **bound.options)
    manifest = job_doc(compiled.text)
    validate(manifest)
    assert (manifest["spec"]["elasticPolicy"]["minReplicas"], manifest["spec"]["elasticPolicy"]["maxReplicas"]) == (2, 4)
    assert manifest["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == 4
    # distcomp.compile takes the range itself, as the command line does
    direct = distcomp.compile(JOBS / "torch" / "component.yaml", "kubeflow", nodes="2:4", scratch=["result"],
                              image="i:1")
    assert direct.text == compiled.text
    with pytest.raises(UsageError, match="--target azureml runs a fixed number of nodes"):
        distcomp.compile(JOBS / "torch" / "component.yaml", "azureml", nodes="2:4")


def test_a_count_passes_as_it_is_and_a_range_is_refused_where_it_cannot_go() -> None:
    assert distcomp.target_nodes("azureml", "3", {"x": 1}) == distcomp.TargetNodes(3, {"x": 1})
    assert distcomp.target_nodes("azureml", None).nodes is None
    with pytest.raises(UsageError, match=r"^--nodes 2:4: --target azureml runs a fixed number of nodes; an elastic "
                                         r"range is for --target kubeflow$"):
        distcomp.target_nodes("azureml", distcomp.NodeRange(2, 4))
    with pytest.raises(UsageError, match="give the elastic range once"):
        distcomp.target_nodes("kubeflow", "2:4", {"elastic": "1:2"})
    with pytest.raises(UsageError, match="unknown target 'nowhere'"):
        distcomp.target_nodes("nowhere", "2:4")
