"""The create-and-wait code, at the HTTP level: the real kubernetes client talks to a server
on 127.0.0.1 that answers as the Kubernetes API does (a scripted exchange in the API's own
shapes: there is no cluster here to record one from). What is checked is what the client sent
and what the caller learns: the outcome, the failure reason and the leading pod's log."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator
from urllib.parse import parse_qs, urlsplit

import pytest
import yaml
from distcomp.targets.kubeflow._submit import SubmitError, submit_and_wait
from kubernetes import client as k8s

from ...conftest import REPO
from ._http import FakeKube, JsonHandler

JOB = "/apis/kubeflow.org/v1/namespaces/ml/pytorchjobs"
MANIFEST = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
            "metadata": {"name": "ddp", "namespace": "ml"},
            "spec": {"nprocPerNode": "2", "pytorchReplicaSpecs": {"Master": {"replicas": 1}}}}


# what kfp-kubernetes put on a step's pod (add_node_selector, add_toleration, use_secret_as_env),
# beside KFP's own env, which the training pods must not get
STEP_POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "kfp-step-abc", "namespace": "ml"},
            "spec": {"nodeSelector": {"pool": "gpu"},
                     "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                     "containers": [{"name": "main", "image": "i:1", "env": [
                         {"name": "KFP_POD_NAME", "value": "kfp-step-abc"},
                         {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf", "key": "token"}}}]}]}}


def condition(kind: str, reason: str, message: str = "") -> dict[str, Any]:
    return {"type": kind, "status": "True", "reason": reason, "message": message,
            "lastTransitionTime": "2026-11-22T01:00:00Z"}


class FakeApi(FakeKube):
    """Answers from ``statuses`` (one per GET of the job at ``job``/NAME), records every request;
    the pod ``ddp-master-0`` is listed for a selector holding ``leader``."""

    def __init__(self, statuses: list[list[dict[str, Any]]], create_status: int = 201, job: str = JOB,
                 name: str = "ddp", leader: str = "replica-type=master") -> None:
        self.statuses, self.create_status = statuses, create_status
        self.requests: list[tuple[str, str, Any]] = []
        self.created: dict[str, Any] = MANIFEST  # what GET answers with: the last object created
        self.configmap: dict[str, Any] | None = None  # one already there, by the code's name: POST is a 409
        self.pods: list[dict[str, Any]] = []  # the job's pods with their statuses, for a job-wide selector
        api = self

        class Handler(JsonHandler):
            def _record(self) -> Any:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length)) if length else None
                api.requests.append((self.command, self.path, body))
                return body

            def do_POST(self) -> None:
                body = self._record()
                if self.path.endswith("/secrets"):  # the job's Secret (test_secrets_k8s)
                    self._send(201, body)
                    return
                if self.path.endswith("/configmaps"):  # the code's ConfigMap: made after the job
                    if api.configmap is not None:
                        self._send(409, {"kind": "Status", "status": "Failure", "reason": "AlreadyExists",
                                         "message": 'configmaps "ddp-code" already exists', "code": 409})
                        return
                    self._send(201, body)
                    return
                if api.create_status != 201:
                    self._send(api.create_status, {"kind": "Status", "status": "Failure", "reason": "Invalid",
                                                   "message": "spec.pytorchReplicaSpecs: Required value",
                                                   "code": api.create_status})
                    return
                api.created = {**body, "metadata": {**body["metadata"], "uid": "1234"}}
                self._send(201, api.created)

            def do_GET(self) -> None:
                self._record()
                path = urlsplit(self.path)
                if path.path == f"{job}/{name}":
                    conditions = api.statuses.pop(0) if len(api.statuses) > 1 else api.statuses[0]
                    self._send(200, {**api.created, "status": {"conditions": conditions}})
                elif path.path == "/api/v1/namespaces/ml/pods":
                    selector = parse_qs(path.query)["labelSelector"][0]
                    pods = [{"metadata": {"name": "ddp-master-0", "namespace": "ml"}}] \
                        if leader in selector else []
                    if "," not in selector and api.pods:  # every pod of the job, with its status
                        pods = api.pods
                    self._send(200, {"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": pods})
                elif path.path == "/api/v1/namespaces/ml/configmaps/ddp-code" and api.configmap is not None:
                    self._send(200, api.configmap)
                elif path.path == "/api/v1/namespaces/ml/pods/kfp-step-abc":  # a KFP step's own pod
                    self._send(200, STEP_POD)
                elif path.path == "/api/v1/namespaces/ml/pods/ddp-worker-0/log":
                    self._send(200, "[rank2]: step 3\n[rank2]: RuntimeError: CUDA out of memory\n", "text/plain")
                elif path.path == "/api/v1/namespaces/ml/pods/ddp-master-0/log":
                    self._send(200, "[rank0]: epoch 1 loss 0.07\n[rank0]: boom\n", "text/plain")
                else:
                    self._send(404, {"kind": "Status", "code": 404})

            def do_DELETE(self) -> None:
                self._record()
                if self.path.startswith("/api/v1/namespaces/ml/configmaps/"):
                    api.configmap = None
                self._send(200, {"kind": "Status", "status": "Success"})

        super().__init__(Handler)


@pytest.fixture
def no_sleep() -> Iterator[list[float]]:
    slept: list[float] = []
    yield slept


def test_success_after_running(no_sleep: list[float]) -> None:
    statuses = [[condition("Created", "PyTorchJobCreated")],
                [condition("Created", "PyTorchJobCreated"), condition("Running", "PyTorchJobRunning")],
                [condition("Running", "PyTorchJobRunning") | {"status": "False"},
                 condition("Succeeded", "PyTorchJobSucceeded", "PyTorchJob ml/ddp successfully completed.")]]
    said: list[str] = []
    with FakeApi(statuses) as api:
        outcome = submit_and_wait(MANIFEST, api.client(), poll=0.5, notify=said.append, sleep=no_sleep.append)
    assert outcome.state == "succeeded" and "successfully completed" in outcome.reason
    assert outcome.log.endswith("boom\n")
    method, path, body = api.requests[0]
    assert (method, path, body) == ("POST", JOB, MANIFEST)  # the manifest as compiled, nothing added
    assert [r[0] for r in api.requests].count("GET") == 3 + 2  # three polls, then the pod list and its log
    assert no_sleep == [0.5, 0.5, 0.5]
    assert said[0] == "created PyTorchJob ml/ddp" and any("Running" in s for s in said)
    log_query = parse_qs(urlsplit(api.requests[-1][1]).query)
    assert log_query["tailLines"] == ["50"]


def test_failure_reason_and_master_log_are_surfaced() -> None:
    why = "PyTorchJob ml/ddp is failed because 1 Worker replica(s) failed."
    statuses = [[condition("Failed", "PyTorchJobFailed", why)]]
    with FakeApi(statuses) as api:
        outcome = submit_and_wait(MANIFEST, api.client(), poll=0, sleep=lambda s: None)
    assert outcome.state == "failed" and "1 Worker replica(s) failed" in outcome.reason
    assert "[rank0]: boom" in outcome.log


def test_deadline_deletes_the_job() -> None:
    with FakeApi([[condition("Running", "PyTorchJobRunning")]]) as api:
        outcome = submit_and_wait(MANIFEST, api.client(), timeout=0.2, poll=0.05,
                                  sleep=lambda s: __import__("time").sleep(s))
    assert outcome.state == "timed_out" and "deleted" in outcome.reason
    deletes = [r for r in api.requests if r[0] == "DELETE"]
    assert len(deletes) == 1 and deletes[0][1] == f"{JOB}/ddp?propagationPolicy=Foreground"


def test_a_refused_job_is_a_clear_error() -> None:
    with FakeApi([[]], create_status=422) as api:
        with pytest.raises(SubmitError, match="refused PyTorchJob ml/ddp: 422.*Required value"):
            submit_and_wait(MANIFEST, api.client(), sleep=lambda s: None)
    assert [r[0] for r in api.requests] == ["POST"]  # nothing polled after a refusal


def test_an_unreachable_api_is_a_clear_error() -> None:
    config = k8s.Configuration()
    config.host = "http://127.0.0.1:9"
    config.retries = False
    with pytest.raises(SubmitError, match="cannot reach the Kubernetes API"):
        submit_and_wait(MANIFEST, k8s.ApiClient(config), sleep=lambda s: None)


# -- `distcomp submit`: compile, create, wait, with one MLflow run on a real server -------------


def kubeconfig(tmp_path: Path, api: FakeApi) -> Path:
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "fake",
        "clusters": [{"name": "fake", "cluster": {"server": f"http://127.0.0.1:{api.server.server_address[1]}"}}],
        "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "me", "namespace": "ml"}}],
        "users": [{"name": "me", "user": {"token": "t"}}]}))
    return path


def submit(tmp_path: Path, api: FakeApi, uri: str, experiment: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "distcomp", "submit", "--target", "kubeflow",
            str(REPO / "examples" / "pytorch-ddp" / "component.yaml"),
            "--nodes", "2", "--volume", "results:/results", "--image", "registry.example/ddp:1", "--name", "ddp",
            "--namespace", "ml", "--kubeconfig", str(kubeconfig(tmp_path, api)), "--poll", "0.05", "--experiment", experiment]
    env = {k: v for k, v in os.environ.items() if k not in ("KUBERNETES_SERVICE_HOST", "MLFLOW_RUN_ID")}
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, env={**env, "MLFLOW_TRACKING_URI": uri})


@pytest.mark.slow
def test_submit_tracks_one_run_for_the_whole_job(tmp_path: Path, mlflow_server: str) -> None:  # noqa: F811
    from mlflow import MlflowClient

    statuses = [[condition("Running", "PyTorchJobRunning")], [condition("Succeeded", "PyTorchJobSucceeded", "done")]]
    with FakeApi(statuses) as api:
        proc = submit(tmp_path, api, mlflow_server, f"submit-{tmp_path.name}")
    assert proc.returncode == 0, proc.stderr
    created = api.requests[0][2]
    assert created["kind"] == "PyTorchJob" and created["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == 1
    env = {e["name"]: e["value"] for e in
           created["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["env"]}
    client = MlflowClient(mlflow_server)
    (run,) = client.search_runs([client.get_experiment_by_name(f"submit-{tmp_path.name}").experiment_id])
    assert env["MLFLOW_RUN_ID"] == run.info.run_id and env["MLFLOW_TRACKING_URI"] == mlflow_server
    assert run.info.status == "FINISHED" and run.data.tags["distcomp.nodes"] == "2"
    assert run.data.tags["distcomp.world_size"] == "4"
    assert [a.path for a in client.list_artifacts(run.info.run_id, "logs")] == ["logs/leader.log"]
    # the code travels in a ConfigMap the job owns (deleted with it), made once the job has its uid
    (method, path, configmap), = [r for r in api.requests if r[1].endswith("/configmaps")]
    assert (method, path) == ("POST", "/api/v1/namespaces/ml/configmaps")
    assert configmap["metadata"]["name"] == "ddp-code" and configmap["metadata"]["ownerReferences"] == [
        {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": "ddp", "uid": "1234"}]
    assert sorted(configmap["data"]) == ["0000-component.yaml", "0001-train.py"]
    assert json.loads(created["metadata"]["annotations"]["distcomp.io/outputs"]) == {
        "model": "pvc results:/results/distcomp/ddp/outputs/model"}
    assert "code: 2 files" in proc.stderr and "output 'model': pvc results:/results/distcomp/ddp/outputs/model" in proc.stderr


def _pod(name: str, code: int, reason: str, finished: str) -> dict[str, Any]:
    terminated = {"exitCode": code, "reason": reason, "finishedAt": finished}
    return {"metadata": {"name": name, "namespace": "ml"},
            "status": {"containerStatuses": [{"name": "pytorch", "state": {"terminated": terminated}, "ready": False,
                                              "restartCount": 0, "image": "i:1", "imageID": ""}]}}


@pytest.mark.slow
def test_submit_failure_reports_the_reason_and_log(tmp_path: Path, mlflow_server: str) -> None:  # noqa: F811
    from mlflow import MlflowClient

    why = "PyTorchJob ml/ddp is failed because 1 Worker replica(s) failed."
    with FakeApi([[condition("Failed", "PyTorchJobFailed", why)]]) as api:
        # the worker's rank failed first; the master then ended on the broken collective
        api.pods = [_pod("ddp-master-0", 1, "Error", "2026-11-22T01:00:09Z"),
                    _pod("ddp-worker-0", 137, "OOMKilled", "2026-11-22T01:00:05Z")]
        proc = submit(tmp_path, api, mlflow_server, f"submit-{tmp_path.name}")
    assert proc.returncode == 1 and why in proc.stderr and "[rank0]: boom" in proc.stderr
    assert "first failed pod ddp-worker-0 (container pytorch: exit code 137, OOMKilled); its last lines:" \
        in proc.stderr and "[rank2]: RuntimeError: CUDA out of memory" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
    client = MlflowClient(mlflow_server)
    (run,) = client.search_runs([client.get_experiment_by_name(f"submit-{tmp_path.name}").experiment_id])
    assert run.info.status == "FAILED" and why in run.data.tags["distcomp.message"]


def test_submit_without_a_cluster_config_is_a_clear_error(tmp_path: Path) -> None:
    argv = [sys.executable, "-m", "distcomp", "submit", "--target", "kubeflow",
            str(REPO / "examples" / "pytorch-ddp" / "component.yaml"),
            "--nodes", "2", "--volume", "results:/results", "--image", "i:1", "--kubeconfig", str(tmp_path / "missing"), "--no-tracking"]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "no Kubernetes configuration" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.slow
def test_sigterm_while_waiting_deletes_the_job(tmp_path: Path) -> None:
    """A cancelled pipeline step stops `distcomp submit` with SIGTERM: nothing may run on."""
    import signal
    import time

    with FakeApi([[condition("Running", "PyTorchJobRunning")]]) as api:
        argv = [sys.executable, "-m", "distcomp", "submit", "--target", "kubeflow",
                str(REPO / "examples" / "pytorch-ddp" / "component.yaml"),
                "--nodes", "2", "--volume", "results:/results", "--image", "i:1", "--name", "ddp", "--namespace", "ml", "--no-tracking",
                "--kubeconfig", str(kubeconfig(tmp_path, api)), "--poll", "0.05"]
        proc = subprocess.Popen(argv, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 60
        while not any(r[0] == "GET" for r in api.requests):
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert [r[1] for r in api.requests if r[0] == "DELETE"] == [f"{JOB}/ddp?propagationPolicy=Foreground"]
    assert "cancelled" in err and "the job was deleted" in err and "Traceback" not in err


# -- a detached job: `distcomp status|logs|cancel` on its id, in other processes ----------------

JOB_ID = "kubeflow:ml/PyTorchJob/ddp"


def distcomp(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "distcomp", *args], capture_output=True, text=True, timeout=120,
                          env=env)


def job_env(tmp_path: Path, api: FakeApi, uri: str) -> dict[str, str]:
    """The environment of a later shell: the cluster from $KUBECONFIG, the store from the job."""
    env = {k: v for k, v in os.environ.items() if k not in ("KUBERNETES_SERVICE_HOST", "MLFLOW_RUN_ID")}
    return {**env, "KUBECONFIG": str(kubeconfig(tmp_path, api)), "MLFLOW_TRACKING_URI": uri,
            "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0", "MLFLOW_HTTP_REQUEST_TIMEOUT": "5"}


def detach(tmp_path: Path, api: FakeApi, env: dict[str, str]) -> str:
    proc = distcomp("submit", "--target", "kubeflow",
                    str(REPO / "examples" / "pytorch-ddp" / "component.yaml"), "--nodes", "2",
                    "--volume", "results:/results", "--image", "i:1", "--name", "ddp", "--namespace", "ml", "--detach",
                    "--experiment", f"detached-{tmp_path.name}", env=env)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip().splitlines()[-1]


def the_run(uri: str, tmp_path: Path) -> Any:
    from mlflow import MlflowClient

    client = MlflowClient(uri)
    (run,) = client.search_runs([client.get_experiment_by_name(f"detached-{tmp_path.name}").experiment_id])
    return run


@pytest.mark.slow
def test_detached_job_status_logs_and_cancel(tmp_path: Path, mlflow_server: str) -> None:  # noqa: F811
    with FakeApi([[condition("Running", "PyTorchJobRunning", "PyTorchJob ddp is running.")]]) as api:
        env = job_env(tmp_path, api, mlflow_server)
        assert detach(tmp_path, api, env) == JOB_ID
        run_id = api.created["metadata"]["annotations"]["distcomp.io/mlflow-run-id"]
        assert the_run(mlflow_server, tmp_path).info.run_id == run_id
        assert the_run(mlflow_server, tmp_path).info.status == "RUNNING"  # --detach leaves it to whoever sees the end

        status = distcomp("status", JOB_ID, "--json", env=env)
        assert status.returncode == 0, status.stderr
        record = json.loads(status.stdout)
        assert record["state"] == "running" and "is running" in record["message"]
        assert record["tracking"]["run_id"] == run_id

        logs = distcomp("logs", JOB_ID, env=env)
        assert logs.returncode == 0 and logs.stdout == "[rank0]: epoch 1 loss 0.07\n[rank0]: boom\n"
        (pods,) = [r[1] for r in api.requests if r[1].startswith("/api/v1/namespaces/ml/pods?")][-1:]
        assert "replica-type%3Dmaster" in pods or "replica-type=master" in pods  # the leading pod, rank 0
        other = distcomp("logs", JOB_ID, "--rank", "99", env=env)  # another rank's pod: test_logs
        assert other.returncode == 2 and "rank 99: PyTorchJob ddp has" in other.stderr and "Traceback" not in other.stderr

        cancel = distcomp("cancel", JOB_ID, env=env)
        assert cancel.returncode == 0, cancel.stderr
        assert "cancelled" in cancel.stdout
    assert [r[1] for r in api.requests if r[0] == "DELETE"] == [f"{JOB}/ddp?propagationPolicy=Foreground"]
    run = the_run(mlflow_server, tmp_path)
    assert run.info.status == "KILLED" and run.data.tags["distcomp.state"] == "cancelled"


@pytest.mark.slow
def test_status_of_an_ended_detached_job_ends_its_run(tmp_path: Path, mlflow_server: str) -> None:  # noqa: F811
    why = "PyTorchJob ml/ddp is failed because 1 Worker replica(s) failed."
    with FakeApi([[condition("Failed", "PyTorchJobFailed", why)]]) as api:
        env = job_env(tmp_path, api, mlflow_server)
        job_id = detach(tmp_path, api, env)
        status = distcomp("status", job_id, env=env)
    assert status.returncode == 0 and "failed" in status.stdout and why in status.stdout
    assert "[rank0]: boom" in status.stdout  # the root cause carries the leading pod's last lines
    run = the_run(mlflow_server, tmp_path)
    assert run.info.status == "FAILED" and why in run.data.tags["distcomp.message"]


@pytest.mark.slow
def test_a_store_that_is_gone_leaves_the_run_and_says_so(tmp_path: Path, mlflow_server: str) -> None:  # noqa: F811
    """The job's state stands when its MLflow run cannot be ended; the user is told which run
    was left and how to end it (not silence)."""
    with FakeApi([[condition("Succeeded", "PyTorchJobSucceeded", "done")]]) as api:
        env = job_env(tmp_path, api, mlflow_server)
        detach(tmp_path, api, env)
        run_id = api.created["metadata"]["annotations"]["distcomp.io/mlflow-run-id"]
        api.created["metadata"]["annotations"]["distcomp.io/mlflow-tracking-uri"] = "http://127.0.0.1:9"
        status = distcomp("status", JOB_ID, env=env)
    assert status.returncode == 0 and "succeeded" in status.stdout, status.stderr
    # where the outputs last, from the job's annotations
    assert "model: pvc results:/results/distcomp/ddp/outputs/model" in status.stdout, status.stdout
    assert f"warning: MLflow run {run_id} at http://127.0.0.1:9 is left as it was" in status.stderr
    assert "Traceback" not in status.stderr
    assert the_run(mlflow_server, tmp_path).info.status == "RUNNING"


@pytest.mark.slow
def test_unknown_and_malformed_kubeflow_job_ids(tmp_path: Path) -> None:
    with FakeApi([[]]) as api:
        env = job_env(tmp_path, api, "http://127.0.0.1:9")
        gone = distcomp("status", "kubeflow:ml/PyTorchJob/other", env=env)
        bad = distcomp("status", "kubeflow:ddp", env=env)
        kind = distcomp("cancel", "kubeflow:ml/NoSuchJob/ddp", env=env)
    assert gone.returncode == 0 and "unknown" in gone.stdout and "not in the cluster" in gone.stdout
    assert bad.returncode == 2 and "expected NAMESPACE/KIND/NAME" in bad.stderr
    assert kind.returncode == 2 and "Kubeflow kind 'NoSuchJob'" in kind.stderr
    assert not [r for r in api.requests if r[0] == "DELETE"]


@pytest.mark.slow
def test_submit_inherit_pod_gives_the_steps_settings_to_every_training_pod(tmp_path: Path) -> None:
    """What `distcomp submit --inherit-pod` does in a KFP step's pod: the step's node selector,
    toleration and secret env reach the job's pods; KFP's own env does not."""
    with FakeApi([[condition("Succeeded", "PyTorchJobSucceeded", "done")]]) as api:
        env = {k: v for k, v in os.environ.items() if k not in ("KUBERNETES_SERVICE_HOST", "MLFLOW_RUN_ID")}
        proc = distcomp("submit", "--target", "kubeflow",
                        str(REPO / "examples" / "pytorch-ddp" / "component.yaml"), "--nodes", "2",
                        "--volume", "results:/results", "--image", "i:1", "--name", "ddp", "--namespace", "ml",
                        "--no-tracking", "--poll", "0.05", "--inherit-pod",
                        "--kubeconfig", str(kubeconfig(tmp_path, api)),
                        env={**env, "POD_NAME": "kfp-step-abc", "POD_NAMESPACE": "ml"})
    assert proc.returncode == 0, proc.stderr
    (created,) = [body for method, path, body in api.requests if method == "POST" and "pytorchjobs" in path]
    for replica in created["spec"]["pytorchReplicaSpecs"].values():
        pod = replica["template"]["spec"]
        assert pod["nodeSelector"] == {"pool": "gpu"} and pod["tolerations"] == STEP_POD["spec"]["tolerations"]
        names = [e["name"] for e in pod["containers"][0]["env"]]
        assert "HF_TOKEN" in names and "KFP_POD_NAME" not in names


@pytest.mark.slow
@pytest.mark.parametrize("ours", [True, False], ids=["an-earlier-jobs", "someone-elses"])
def test_a_configmap_left_by_an_earlier_job_of_that_name_is_replaced(tmp_path: Path, ours: bool) -> None:
    """Submitting a job name again before the cluster has collected the last job's code: that
    ConfigMap (distcomp's label for this job name, another owner) is replaced; one distcomp did
    not make is left alone, and the new job is deleted with a clear error."""
    labels = {"app.kubernetes.io/managed-by": "distcomp", "distcomp.dev/job": "ddp"} if ours else {"team": "a"}
    with FakeApi([[condition("Succeeded", "PyTorchJobSucceeded", "done")]]) as api:
        api.configmap = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
            "name": "ddp-code", "namespace": "ml", "labels": labels,
            "ownerReferences": [{"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": "ddp", "uid": "old"}]}}
        env = {k: v for k, v in os.environ.items() if k not in ("KUBERNETES_SERVICE_HOST", "MLFLOW_RUN_ID")}
        proc = distcomp("submit", "--target", "kubeflow",
                        str(REPO / "examples" / "pytorch-ddp" / "component.yaml"), "--volume",
                        "results:/results", "--image", "i:1", "--name", "ddp", "--namespace", "ml", "--no-tracking",
                        "--poll", "0.05", "--kubeconfig", str(kubeconfig(tmp_path, api)), env=env)
    deletes = [path for method, path, _b in api.requests if method == "DELETE"]
    if ours:
        assert proc.returncode == 0, proc.stderr
        assert deletes == ["/api/v1/namespaces/ml/configmaps/ddp-code"]
        assert [m for m, p, _b in api.requests if p.endswith("/configmaps")] == ["POST", "POST"]
    else:
        assert proc.returncode != 0 and "Traceback" not in proc.stderr
        assert "choose another --name" in proc.stderr and "the job was deleted" in proc.stderr, proc.stderr
        assert [d.split("?")[0] for d in deletes] == ["/apis/kubeflow.org/v1/namespaces/ml/pytorchjobs/ddp"]


RUN_ANNOTATIONS = ("distcomp.io/mlflow-run-id", "distcomp.io/mlflow-tracking-uri")


def _unbound(manifest: dict[str, Any], run_env: dict[str, str]) -> dict[str, Any]:
    """``manifest`` less what submit binds: the run's annotations and env entries."""
    out = json.loads(json.dumps(manifest))
    notes = out["metadata"]["annotations"]
    for key in RUN_ANNOTATIONS:
        notes.pop(key)
    for replica in out["spec"]["pytorchReplicaSpecs"].values():
        main = replica["template"]["spec"]["containers"][0]
        main["env"] = [e for e in main["env"] if e["name"] not in run_env]
    return out


@pytest.mark.slow
def test_what_compile_printed_is_what_runs(tmp_path: Path, mlflow_server: str,  # noqa: F811
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """`distcomp.submit(distcomp.compile(...))` creates the compiled manifest plus the job's
    MLflow run (its env in every pod, its annotations) and nothing else; the manifest is built
    once per submit, also by `distcomp.submit(spec, target, ...)`."""
    import distcomp
    from distcomp.errors import UsageError
    from distcomp.targets.kubeflow import _compile

    monkeypatch.setenv("MLFLOW_TRACKING_URI", mlflow_server)
    for name in ("KUBERNETES_SERVICE_HOST", "MLFLOW_RUN_ID"):
        monkeypatch.delenv(name, raising=False)
    builds: list[str] = []
    build = _compile.compile_job

    def counted(*args: Any, **kwargs: Any) -> Any:
        builds.append(kwargs.get("name") or "")
        return build(*args, **kwargs)

    monkeypatch.setattr(_compile, "compile_job", counted)
    spec = REPO / "examples" / "pytorch-ddp" / "component.yaml"
    options = dict(volumes={"results": "/results"}, image="registry.example/ddp:1", name="ddp", namespace="ml",
                   timeout=600.0)
    with FakeApi([[condition("Succeeded", "PyTorchJobSucceeded", "done")]]) as api:
        where = dict(kubeconfig=str(kubeconfig(tmp_path, api)), poll=0.05, experiment=f"same-{tmp_path.name}")
        compiled = distcomp.compile(str(spec), "kubeflow", nodes=2, **options)
        assert builds == ["ddp"]
        with pytest.raises(UsageError, match="'image' changes what is compiled"):
            distcomp.submit(compiled, image="other:2")
        handle = distcomp.submit(compiled, **where)
        assert builds == ["ddp"]  # submitted as compiled: not built again
        outcome = handle.wait(timeout=60, poll=0.05)
        assert outcome.succeeded and outcome.tracking is not None
        (created,) = [body for method, path, body in api.requests if method == "POST" and path == JOB]
        run_env = {e["name"]: e["value"] for e in
                   created["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["env"]
                   if e["name"].startswith(("MLFLOW_", "DISTCOMP_MLFLOW_")) and e["name"] != "MLFLOW_DISABLE_TELEMETRY"}
        assert run_env["MLFLOW_RUN_ID"] == outcome.tracking.run_id
        assert run_env["MLFLOW_TRACKING_URI"] == mlflow_server
        assert created["metadata"]["annotations"]["distcomp.io/mlflow-run-id"] == outcome.tracking.run_id
        assert _unbound(created, run_env) == compiled.data  # the rest is the compiled manifest, as it was printed
        assert created["spec"]["runPolicy"]["activeDeadlineSeconds"] == 600  # --timeout is compiled in
        for replica in created["spec"]["pytorchReplicaSpecs"].values():  # the run reaches every pod
            env = {e["name"]: e.get("value") for e in replica["template"]["spec"]["containers"][0]["env"]}
            assert {k: env[k] for k in run_env} == run_env

        api.requests.clear()
        again = distcomp.submit(str(spec), "kubeflow", nodes=2, **options, **where)  # compile once, then submit
        assert builds == ["ddp", "ddp"]
        assert again.wait(timeout=60, poll=0.05).succeeded
        (created,) = [body for method, path, body in api.requests if method == "POST" and path == JOB]
        assert _unbound(created, run_env) == compiled.data


def test_submit_dryrun_prints_the_compiled_job_and_creates_nothing(tmp_path: Path) -> None:
    """`distcomp submit --dryrun` shows what submit would create (what `distcomp compile` prints
    with the same flags) and says what submit binds; the cluster hears nothing."""
    spec = str(REPO / "examples" / "pytorch-ddp" / "component.yaml")
    flags = ["--nodes", "2", "--volume", "results:/results", "--image", "i:1", "--name", "ddp", "--namespace", "ml",
             "--timeout", "600"]
    env = {k: v for k, v in os.environ.items() if k not in ("KUBERNETES_SERVICE_HOST", "MLFLOW_RUN_ID")}
    with FakeApi([[condition("Succeeded", "PyTorchJobSucceeded", "done")]]) as api:
        dry = distcomp("submit", "--target", "kubeflow",
                       spec, *flags, "--kubeconfig", str(kubeconfig(tmp_path, api)), "--dryrun", env=env)
        assert api.requests == []
    compiled = distcomp("compile", "--target", "kubeflow", spec, *flags, env=env)
    assert dry.returncode == 0 and compiled.returncode == 0, dry.stderr + compiled.stderr
    assert dry.stdout == compiled.stdout and "activeDeadlineSeconds: 600" in dry.stdout
    assert "bound when submitted: the job's MLflow run" in dry.stderr
