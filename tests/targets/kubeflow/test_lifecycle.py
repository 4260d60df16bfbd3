"""Retries, deadlines, clean-up, restart policy, elastic PyTorchJobs, gang scheduling and Kueue:
each where the kind's CRD puts it, validated with nothing pruned."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import distcomp

from .test_manifests import JOBS, validate
from ._scratch import scratch
from ._scratch import job_doc

OWN = JOBS / "own"
LIFE = {"backoff_limit": 3, "ttl_seconds": 600, "active_deadline": 3600, "restart_policy": "OnFailure", "gang": True,
        "queue": "team-a"}


def compiled(job: str | Path, **options: Any) -> dict[str, Any]:
    path = job if isinstance(job, Path) else JOBS / job / "component.yaml"
    manifest: dict[str, Any] = distcomp.compile(str(path), "kubeflow", image="i:1", **scratch(path, options)).data
    validate(manifest)
    return manifest


def replica_specs(manifest: dict[str, Any]) -> dict[str, Any]:
    spec = manifest["spec"]
    return dict(spec[next(k for k in spec if k.endswith("ReplicaSpecs"))])


@pytest.mark.slow
@pytest.mark.parametrize("job, pods", [("torch", 3), ("deepspeed", 3), ("mpi", 4), ("tensorflow", 3)])
def test_run_policy_restart_policy_and_queue_land_where_the_crd_puts_them(job: str, pods: int) -> None:
    manifest = compiled(job, nodes=3, nproc_per_node=1, **LIFE)
    assert manifest["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "team-a"
    assert manifest["spec"]["runPolicy"] == {"cleanPodPolicy": "Running", "backoffLimit": 3,
                                             "ttlSecondsAfterFinished": 600, "activeDeadlineSeconds": 3600,
                                             "schedulingPolicy": {"minAvailable": pods}}
    assert {r["restartPolicy"] for r in replica_specs(manifest).values()} == {"OnFailure"}
    plain = compiled(job, nodes=3, nproc_per_node=1)  # defaults: a failed rank fails the job, no queue
    assert plain["spec"]["runPolicy"] == {"cleanPodPolicy": "Running"}
    assert {r["restartPolicy"] for r in replica_specs(plain).values()} == {"Never"}
    assert "kueue.x-k8s.io/queue-name" not in plain["metadata"]["labels"]


def test_exit_code_is_a_restart_policy_and_others_are_refused() -> None:
    manifest = compiled("torch", restart_policy="ExitCode")
    assert {r["restartPolicy"] for r in replica_specs(manifest).values()} == {"ExitCode"}
    with pytest.raises(distcomp.errors.UsageError, match=r"--restart-policy 'Sometimes': expected one of Never, "):
        compiled("torch", restart_policy="Sometimes")
    with pytest.raises(distcomp.errors.UsageError, match="--queue"):
        compiled("torch", queue="not a label!")


@pytest.mark.slow
def test_an_elastic_pytorchjob_has_workers_only_and_a_c10d_range() -> None:
    from kubeflow.training import ApiClient

    manifest = compiled("torch", elastic="2:4", gang=True, backoff_limit=2)
    specs = replica_specs(manifest)
    assert list(specs) == ["Worker"] and specs["Worker"]["replicas"] == 4
    assert manifest["spec"]["elasticPolicy"] == {"minReplicas": 2, "maxReplicas": 4, "rdzvBackend": "c10d",
                                                 "maxRestarts": 2}
    assert manifest["spec"]["runPolicy"]["schedulingPolicy"] == {"minAvailable": 2}
    command = specs["Worker"]["template"]["spec"]["containers"][0]["command"]
    # torchrun takes the rendezvous from the operator's PET_* variables: no fixed node rank
    assert command[:4] == ["torchrun", "--no-python", "python", "rank.py"] and "--node-rank" not in command

    class Response:
        data = json.dumps(manifest)

    client = ApiClient()  # the SDK's typed model keeps every field, elasticPolicy included
    assert client.sanitize_for_serialization(client.deserialize(Response(), "KubeflowOrgV1PyTorchJob")) == manifest


@pytest.mark.parametrize("job, options, message", [
    ("mpi", {"elastic": "2:4"}, "a MPIJob has no elastic node range"),
    ("torch", {"elastic": "4:2"}, r"--elastic '4:2': give a node range MIN:MAX"),
    ("torch", {"elastic": "two"}, "--elastic 'two'"),
    (OWN / "torchrun.yaml", {"elastic": "1:2"}, "the command starts its own torchrun"),
    ("torch", {"trainer_v2": True, "backoff_limit": 1, "gang": True}, "--backoff-limit, --gang: a TrainJob leaves"),
])
def test_what_a_kind_cannot_do_is_a_clear_error(job: str | Path, options: dict[str, Any], message: str) -> None:
    with pytest.raises(distcomp.errors.UsageError, match=message):
        compiled(job, **options)


def test_a_trainjob_takes_its_deadline_and_queue() -> None:
    manifest = compiled("torch", trainer_v2=True, active_deadline=7200, queue="team-a")
    assert manifest["spec"]["activeDeadlineSeconds"] == 7200
    assert manifest["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "team-a"


def test_the_deadline_defaults_to_the_submit_timeout() -> None:
    """Through ``distcomp.compile``, what submit creates (no test-only helper: issue 35)."""
    assert compiled("mpi", timeout=90.5)["spec"]["runPolicy"]["activeDeadlineSeconds"] == 91
    assert compiled("mpi", timeout=90.5, active_deadline=30)["spec"]["runPolicy"]["activeDeadlineSeconds"] == 30


@pytest.mark.slow
def test_cli_takes_the_lifecycle_flags() -> None:
    argv = [sys.executable, "-m", "distcomp", "compile", "--target", "kubeflow", str(JOBS / "torch" / "component.yaml"),
            "--scratch", "result",
            "--image", "i:1", "--elastic", "1:3", "--backoff-limit", "1", "--ttl-seconds-after-finished", "60",
            "--active-deadline-seconds", "600", "--restart-policy", "OnFailure", "--gang", "--queue", "q"]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    manifest = job_doc(proc.stdout)
    validate(manifest)
    assert manifest["spec"]["elasticPolicy"]["maxReplicas"] == 3
    assert manifest["spec"]["runPolicy"]["ttlSecondsAfterFinished"] == 60
    bad = subprocess.run(argv[:-2] + ["--elastic", "0:2"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "--elastic '0:2'" in bad.stderr and "Traceback" not in bad.stderr


@pytest.mark.slow
def test_nodes_takes_an_elastic_range_torchx_style() -> None:
    """`--nodes 2:4` is `--elastic 2:4` laid out for 4 nodes; a target without elastic jobs, a
    range given twice and MAX < MIN are refused by name."""
    base = [sys.executable, "-m", "distcomp", "compile", str(JOBS / "torch" / "component.yaml")]
    proc = subprocess.run([*base, "--target", "kubeflow", "--image", "i:1", "--nodes", "2:4", "--scratch", "result"],
                          capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    manifest = job_doc(proc.stdout)
    validate(manifest)
    assert (manifest["spec"]["elasticPolicy"]["minReplicas"], manifest["spec"]["elasticPolicy"]["maxReplicas"]) == (2, 4)
    assert manifest["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == 4
    for extra, said in ((["--target", "azureml"], "--target azureml runs a fixed number of nodes; an elastic range is "
                         "for --target kubeflow"),
                        (["--target", "kubeflow", "--image", "i:1", "--elastic", "1:2"], "give the elastic range once"),
                        (["--target", "kubeflow", "--image", "i:1", "--nodes", "4:2"], "MIN:MAX with MIN <= MAX")):
        nodes = [] if "--nodes" in extra else ["--nodes", "2:4"]
        bad = subprocess.run([*base, *extra, *nodes], capture_output=True, text=True, timeout=60)
        assert bad.returncode == 2 and said in bad.stderr and "Traceback" not in bad.stderr, bad.stderr


def test_a_plugin_kind_without_replica_specs_refuses_what_it_cannot_place() -> None:
    from distcomp.targets.kubeflow._lifecycle import Lifecycle, apply

    manifest: dict[str, Any] = {"kind": "Custom", "metadata": {"name": "x"}, "spec": {"pods": 2}}
    apply(manifest, Lifecycle(active_deadline=60, deadline_from_timeout=True, queue="q"), {})
    assert manifest == {"kind": "Custom", "metadata": {"name": "x", "labels": {"kueue.x-k8s.io/queue-name": "q"}},
                        "spec": {"pods": 2}}
    with pytest.raises(distcomp.errors.UsageError, match="a Custom has no replica specs"):
        apply(manifest, Lifecycle(backoff_limit=1), {})
