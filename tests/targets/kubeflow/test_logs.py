"""`distcomp logs kubeflow:NS/KIND/NAME --rank N`: the log of the pod that holds rank N, found
by the job object's own layout and the operators' pod labels, through the real kubernetes
client against a server on 127.0.0.1 answering as the Kubernetes API does; ``--follow`` until
the job ends."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import pytest
import yaml

import distcomp
from distcomp.targets.kubeflow._target import KubeflowTarget

from ._http import FakeKube, JsonHandler
from .test_manifests import JOBS
from ._scratch import scratch

PLURALS = {"PyTorchJob": "kubeflow.org/v1/namespaces/ml/pytorchjobs", "TFJob": "kubeflow.org/v1/namespaces/ml/tfjobs",
           "MPIJob": "kubeflow.org/v2beta1/namespaces/ml/mpijobs",
           "TrainJob": "trainer.kubeflow.org/v1alpha1/namespaces/ml/trainjobs"}


class Cluster(FakeKube):
    """One job (its compiled manifest) and a pod for every label selector asked: the pod's log
    names the selector; it has one line when first read and two after."""

    def __init__(self, manifest: dict[str, Any], states: list[str]) -> None:
        self.manifest, self.states = manifest, states
        self.selectors: list[str] = []
        cluster = self
        reads: dict[str, int] = {}

        class Handler(JsonHandler):
            def do_GET(self) -> None:
                path = urlsplit(self.path)
                name = cluster.manifest["metadata"]["name"]
                if path.path == f"/apis/{PLURALS[cluster.manifest['kind']]}/{name}":
                    state = cluster.states.pop(0) if len(cluster.states) > 1 else cluster.states[0]
                    status = {"conditions": [{"type": state, "status": "True", "reason": state}]}
                    self._send(200, {**cluster.manifest, "status": status})
                elif path.path == "/api/v1/namespaces/ml/pods":
                    selector = parse_qs(path.query)["labelSelector"][0]
                    cluster.selectors.append(selector)
                    pod = f"pod-{cluster.selectors.index(selector)}"
                    pods[pod] = selector
                    self._send(200, {"kind": "PodList", "apiVersion": "v1", "metadata": {},
                                     "items": [{"metadata": {"name": pod, "namespace": "ml"}}]})
                elif path.path.startswith("/api/v1/namespaces/ml/pods/") and path.path.endswith("/log"):
                    pod = unquote(path.path.split("/")[-2])
                    reads[pod] = reads.get(pod, 0) + 1
                    lines = [f"{pods[pod]} line {i}" for i in range(1, min(reads[pod], 2) + 1)]
                    self._send(200, "".join(line + "\n" for line in lines), "text/plain")
                else:
                    self._send(404, {"kind": "Status", "code": 404})

        pods: dict[str, str] = {}
        super().__init__(Handler)

    def target(self) -> KubeflowTarget:
        target = KubeflowTarget()
        target._api = self.client()
        target._options = {"poll": 0.0}
        return target


def manifest(job: str, nodes: int, per_node: int, **options: Any) -> dict[str, Any]:
    path = JOBS / job / "component.yaml"
    compiled = distcomp.compile(str(path), "kubeflow", image="i:1", name="j", namespace="ml", nodes=nodes,
                                nproc_per_node=per_node, **scratch(path, options)).data
    return dict(compiled)


def job_id(m: dict[str, Any]) -> str:
    return f"kubeflow:ml/{m['kind']}/{m['metadata']['name']}"


OP = "training.kubeflow.org/job-name=j,training.kubeflow.org/replica-type={},training.kubeflow.org/replica-index={}"


@pytest.mark.parametrize("job, nodes, per_node, options, rank, selector", [
    ("torch", 3, 2, {}, 1, OP.format("master", 0)),
    ("torch", 3, 2, {}, 2, OP.format("worker", 0)),
    ("torch", 3, 2, {}, 5, OP.format("worker", 1)),
    ("torch", 1, 2, {"elastic": "2:3"}, 4, OP.format("worker", 2)),
    ("tensorflow", 3, 1, {}, 2, OP.format("worker", 2)),
    ("mpi", 2, 2, {}, 3, "training.kubeflow.org/job-name=j,training.kubeflow.org/job-role=launcher"),
    ("torch", 2, 2, {"trainer_v2": True}, 3, "jobset.sigs.k8s.io/jobset-name=j,jobset.sigs.k8s.io/replicatedjob-name=node,"
                                             "batch.kubernetes.io/job-completion-index=1"),
])
def test_a_ranks_log_is_its_nodes_pods(job: str, nodes: int, per_node: int, options: dict[str, Any], rank: int,
                                       selector: str) -> None:
    m = manifest(job, nodes, per_node, **options)
    with Cluster(m, ["Succeeded"]) as cluster:
        lines = list(cluster.target().logs(job_id(m), rank, follow=False))
    assert cluster.selectors == [selector]
    assert lines == [f"{selector} line 1\n"]


def test_follow_reads_until_the_job_ends_without_repeating() -> None:
    m = manifest("torch", 2, 1)
    with Cluster(m, ["Running", "Running", "Running", "Succeeded"]) as cluster:
        lines = list(cluster.target().logs(job_id(m), 1, follow=True))
    worker = OP.format("worker", 0)
    assert lines == [f"{worker} line 1\n", f"{worker} line 2\n"]  # each line once, then the job had ended
    assert cluster.states == ["Succeeded"]


@pytest.mark.parametrize("job, rank, message", [
    ("torch", 4, r"rank 4: PyTorchJob j has 4 rank\(s\) \(0\.\.3\)"),
    ("mpi", 4, "rank 4: MPIJob j has 4 rank"),
    ("torch", -1, "a rank is 0 or more"),
])
def test_a_rank_beyond_the_world_is_a_clear_error(job: str, rank: int, message: str) -> None:
    m = manifest(job, 2, 2)
    with Cluster(m, ["Running"]) as cluster, pytest.raises(distcomp.errors.UsageError, match=message):
        list(cluster.target().logs(job_id(m), rank, follow=False))


@pytest.mark.slow
def test_cli_logs_rank(tmp_path: Path) -> None:
    m = manifest("torch", 2, 2)
    with Cluster(m, ["Succeeded"]) as cluster:
        config = tmp_path / "kubeconfig"
        server = f"http://127.0.0.1:{cluster.server.server_address[1]}"
        config.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": "t",
            "clusters": [{"name": "t", "cluster": {"server": server}}],
            "contexts": [{"name": "t", "context": {"cluster": "t", "user": "u"}}], "users": [{"name": "u", "user": {}}]}))
        env = {"KUBECONFIG": str(config), "PATH": "/usr/bin:/bin"}
        argv = [sys.executable, "-m", "distcomp", "logs", job_id(m), "--rank"]
        proc = subprocess.run([*argv, "3"], capture_output=True, text=True, timeout=60, env=env)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout == OP.format("worker", 0) + " line 1\n"
        bad = subprocess.run([*argv, "9"], capture_output=True, text=True, timeout=60, env=env)
    assert bad.returncode == 2 and "has 4 rank(s)" in bad.stderr and "Traceback" not in bad.stderr
    assert json.dumps(m)  # the job object served is the compiled manifest itself
