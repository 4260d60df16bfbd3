"""The multi-node KFP step for real, without a cluster: under kfp.local's SubprocessRunner the
step writes a submit job record and runs `python -m distcomp.worker` on it (never `distcomp
submit` flags), which submits to the kubeflow target against a Kubernetes API on 127.0.0.1 (KUBECONFIG) whose POST of a
PyTorchJob makes the operator's pods (tests/targets/kubeflow/_operator.py) and runs them here,
and whose GET reports the job Running, then Succeeded or Failed from the pods' exit codes.
The "shared volume" is a folder of this machine mounted at the same path in the step and in
every pod, as a PersistentVolumeClaim would be: what the pods write there is real."""

import json
import re
import threading
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any, Iterator
from urllib.parse import parse_qs, urlsplit

import pytest
import yaml
from distcomp.core.jobrecord import VERSION, read_record
from distcomp.kfp import KfpTargetError, compile_component, load_component
from distcomp.core.plugins import get_plugin_manager
from distcomp.targets.kfp._step import submit_record
from kfp import compiler, dsl
from kfp.components import load_component_from_file

from tests.targets.kubeflow._operator import LOCALHOST, Finished, free_ports, pytorchjob_pods, run_pods

from ..kubeflow._http import JsonHandler

ALLREDUCE = Path(__file__).resolve().parent / "jobs" / "allreduce" / "component.yaml"
CLAIM = "shared-data"
# kfp.local warns about any non-python base image; here "the image" is this machine
pytestmark = pytest.mark.filterwarnings("ignore:You may be attemping to run a task:RuntimeWarning")
JOBS = re.compile(r"/apis/kubeflow\.org/v1/namespaces/([^/]+)/pytorchjobs(?:/([^/?]+))?")


class FakeCluster:
    """The Kubernetes API and a training operator for PyTorchJobs, on this machine."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.manifests: dict[str, dict[str, Any]] = {}
        self.finished: dict[str, Finished] = {}
        self.threads: list[threading.Thread] = []
        cluster = self

        class Handler(JsonHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if not JOBS.fullmatch(urlsplit(self.path).path) or body.get("kind") != "PyTorchJob":
                    self._send(404, {"kind": "Status", "code": 404})
                    return
                cluster.start(body)
                self._send(201, {**body, "metadata": {**body["metadata"], "uid": "1234"}})

            def do_GET(self) -> None:
                path = urlsplit(self.path)
                job = JOBS.fullmatch(path.path)
                pods = re.fullmatch(r"/api/v1/namespaces/[^/]+/pods", path.path)
                log = re.fullmatch(r"/api/v1/namespaces/[^/]+/pods/([^/]+)/log", path.path)
                if job and job.group(2) in cluster.manifests:
                    self._send(200, {**cluster.manifests[job.group(2)], "status": cluster.status(job.group(2))})
                elif pods:
                    self._send(200, {"kind": "PodList", "apiVersion": "v1", "metadata": {},
                                     "items": cluster.leaders(parse_qs(path.query)["labelSelector"][0])})
                elif log and (cluster.folder / "pods" / f"{log.group(1)}.log").exists():
                    self._send(200, (cluster.folder / "pods" / f"{log.group(1)}.log").read_text(), "text/plain")
                else:
                    self._send(404, {"kind": "Status", "code": 404})

        self.server = ThreadingHTTPServer((LOCALHOST, 0), Handler)

    def start(self, manifest: dict[str, Any]) -> None:
        """The operator and the kubelets: the job's pods, run concurrently in a thread."""
        name = manifest["metadata"]["name"]
        self.manifests[name] = manifest
        port = free_ports(1)[0]  # the master's service: 127.0.0.1 and a free port here
        pods = [p.with_env(MASTER_ADDR=LOCALHOST, MASTER_PORT=str(port)) for p in pytorchjob_pods(manifest)]

        def run() -> None:
            self.finished[name] = run_pods(pods, self.folder, self.folder / "pods", timeout=90)

        thread = threading.Thread(target=run, daemon=True)
        self.threads.append(thread)
        thread.start()

    def status(self, name: str) -> dict[str, Any]:
        """The conditions the operator reports: Running until every pod ended."""
        running = {"type": "Running", "status": "True", "reason": "PyTorchJobRunning"}
        done = self.finished.get(name)
        if done is None:
            return {"conditions": [running]}
        failed = [pod for pod, code in done.codes.items() if code != 0]
        if not failed:
            end = {"type": "Succeeded", "status": "True", "reason": "PyTorchJobSucceeded",
                   "message": f"PyTorchJob default/{name} successfully completed."}
        else:
            end = {"type": "Failed", "status": "True", "reason": "PyTorchJobFailed",
                   "message": f"PyTorchJob default/{name} is failed because pod {failed[0]} exited with code "
                              f"{done.codes[failed[0]]}."}
        return {"conditions": [{**running, "status": "False"}, end]}

    def leaders(self, selector: str) -> list[dict[str, Any]]:
        found = re.search(r"training\.kubeflow\.org/job-name=([^,]+)", selector)
        if not found or "replica-type=master" not in selector:
            return []
        return [{"metadata": {"name": f"{found.group(1)}-master-0", "namespace": "default"}}]

    def kubeconfig(self) -> Path:
        path = self.folder / "kubeconfig"
        path.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": "fake",
            "clusters": [{"name": "fake", "cluster": {"server": f"http://{LOCALHOST}:{self.server.server_address[1]}"}}],
            "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "me"}}],
            "users": [{"name": "me", "user": {"token": "t"}}]}))
        return path


@pytest.fixture
def cluster(kfp_local: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeCluster]:
    fake = FakeCluster(tmp_path)
    threading.Thread(target=fake.server.serve_forever, daemon=True).start()
    monkeypatch.setenv("KUBECONFIG", str(fake.kubeconfig()))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    try:
        yield fake
    finally:
        fake.server.shutdown()
        fake.server.server_close()
        for thread in fake.threads:  # run_pods ends every pod it started before it returns
            thread.join(timeout=120)


def pipeline_with(train: Any) -> Any:
    @dsl.component(base_image="python:3.11")
    def make_data(data: dsl.Output[dsl.Dataset]):
        with open(data.path, "w") as f:
            f.write("forty-two")

    @dsl.pipeline(name="multinode")
    def pipeline(fail_rank: int = -1) -> dsl.Artifact:
        return train(data=make_data().outputs["data"], fail_rank=fail_rank).outputs["result"]

    return pipeline


@pytest.mark.slow
def test_two_pods_all_reduce_and_the_output_comes_back(cluster: FakeCluster, tmp_path: Path) -> None:
    mount = tmp_path / "volume"
    mount.mkdir()
    train = load_component(ALLREDUCE, nodes=2, nproc_per_node=2, image="registry.example/ddp:1",
                           shared_volume=(CLAIM, str(mount)), poll=0.2, timeout=120,
                           job_options={"memory": "3Gi", "gpus_per_node": 1})
    out = pipeline_with(train)().output

    records = [json.loads(p.read_text()) for p in sorted(Path(out.path).glob("rank*.json"))]
    assert [r["rank"] for r in records] == [0, 1, 2, 3], records  # 2 pods x 2 ranks, one world
    assert {(r["world"], r["sum"], r["data"]) for r in records} == {(4, 10.0, "forty-two")}
    (name,) = cluster.manifests
    assert [(r["pod"], r["node_rank"]) for r in records] == [
        (f"{name}-master-0", "0"), (f"{name}-master-0", "0"), (f"{name}-worker-0", "1"), (f"{name}-worker-0", "1")]
    assert re.fullmatch(r"kfp-allreduce-[0-9a-f]{6}", name) and out.metadata["distcomp.job"] == name
    # the step learnt the outcome from the JobOutcome the worker wrote (outcome_file): id, state, condition
    assert re.fullmatch(rf"kubeflow:[a-z0-9-]+/PyTorchJob/{name} succeeded Succeeded: .*",
                        out.metadata["distcomp.outcome"])
    pod = cluster.manifests[name]["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]
    # the shared PVC, then the memory-backed /dev/shm every torch-style job's pods get
    assert pod["volumes"] == [{"name": "distcomp-pvc-0", "persistentVolumeClaim": {"claimName": CLAIM}},
                              {"name": "distcomp-shm", "emptyDir": {"medium": "Memory"}}]
    container = pod["containers"][0]
    assert container["image"] == "registry.example/ddp:1"
    assert container["resources"] == {"limits": {"nvidia.com/gpu": 1, "memory": "3Gi"}, "requests": {"memory": "3Gi"}}
    assert container["volumeMounts"] == [{"name": "distcomp-pvc-0", "mountPath": str(mount)},
                                         {"name": "distcomp-shm", "mountPath": "/dev/shm"}]
    assert container["workingDir"] == str(mount / "distcomp" / name / "code")
    assert not (mount / "distcomp" / name).exists()  # the run's folder on the volume is cleaned up


@pytest.mark.slow
def test_a_failed_pod_fails_the_step_with_the_reason(cluster: FakeCluster, tmp_path: Path,
                                                     capfd: pytest.CaptureFixture[str]) -> None:
    mount = tmp_path / "volume"
    mount.mkdir()
    train = load_component(ALLREDUCE, nodes=2, image="registry.example/ddp:1", shared_volume=(CLAIM, str(mount)),
                           poll=0.2, timeout=120)
    with pytest.raises(RuntimeError, match="FAILURE"):
        pipeline_with(train)(fail_rank=1)
    text = "".join(capfd.readouterr())
    (name,) = cluster.manifests
    assert cluster.finished[name].codes[f"{name}-worker-0"] not in (0, None)
    assert f"is failed because pod {name}-worker-0 exited with code" in text
    assert "distcomp submit exited with code 1" in text
    assert "-m distcomp.worker" in text and "--volume" not in text  # the step ran a record, not flags
    assert re.search(rf"kubeflow:[a-z0-9-]+/PyTorchJob/{name} failed Failed: ", text)  # from the JSON record
    assert (mount / "distcomp" / name / "component.yaml").exists()  # kept, with what the pods wrote


def test_the_compiled_component_carries_the_submit_records_template(tmp_path: Path) -> None:
    train = load_component(ALLREDUCE, nodes=3, nproc_per_node=2, image="registry.example/ddp:1",
                           shared_volume=(CLAIM, "/mnt/shared"), job_options={"queue": "q", "gang": True})
    compiler.Compiler().compile(train, package_path=str(tmp_path / "c.yaml"))
    (executor,) = yaml.safe_load((tmp_path / "c.yaml").read_text())["deploymentSpec"]["executors"].values()
    assert executor["container"]["image"] == "registry.example/ddp:1"
    source = max(executor["container"]["command"], key=len)
    assert "run_distcomp_submit(" in source and "run_distcomp_step(" not in source
    # the record's format and the kubeflow target's options by name: no `distcomp submit` flag
    assert ("{'distcomp_job': 2, 'action': 'submit', 'target': 'kubeflow', 'options': {'nodes': 3, "
            "'nproc_per_node': 2, 'image': 'registry.example/ddp:1', 'max_restarts': 0, 'gang': True, 'queue': 'q'}}") \
        in source  # max_restarts 0: the job restarts nothing itself, the step's retry submits it again
    assert "'--nodes'" not in source and "'distcomp', 'submit'" not in source
    assert f"'{CLAIM}', '/mnt/shared', 'kfp-allreduce', None," in source


def test_the_step_record_is_one_the_worker_reads_and_the_target_takes(tmp_path: Path) -> None:
    template = {"distcomp_job": VERSION, "action": "submit", "target": "kubeflow",
                "options": {"nodes": 2, "image": "i:1", "gpus_per_node": 1}}
    record = submit_record("/v/distcomp/j/component.yaml", "j", "c", "/v", "/v/distcomp/j/code",
                           {"data": ("port", "/v/distcomp/j/inputs/data"), "n": ("integer", 3.0),
                            "opt": ("number", None)}, {"result": "/v/distcomp/j/outputs/result"}, template, "ml",
                           False, "ignored", "/v/distcomp/j/outcome.json")
    (tmp_path / "job.json").write_text(json.dumps(record))
    read = read_record(tmp_path / "job.json")
    assert (read.action, read.target, read.spec, read.outcome_file) == (
        "submit", "kubeflow", "/v/distcomp/j/component.yaml", "/v/distcomp/j/outcome.json")
    assert dict(read.inputs) == {"data": "/v/distcomp/j/inputs/data", "n": "3"}  # one not delivered: none
    options = dict(read.options)
    assert options == {"nodes": 2, "image": "i:1", "gpus_per_node": 1, "name": "j", "volumes": {"c": "/v"},
                       "workdir": "/v/distcomp/j/code", "output_paths": {"result": "/v/distcomp/j/outputs/result"},
                       "tracking": False, "namespace": "ml", "inherit_pod": True}
    del options["nodes"]  # a keyword of distcomp.submit; the rest are the kubeflow target's own, as it checks them
    bound = get_plugin_manager().target("kubeflow").type.bind({**options, "inputs": dict(read.inputs)}, True)
    assert bound["volumes"] == {"c": "/v"} and bound["inherit_pod"] is True


@pytest.mark.slow
def test_a_component_compiled_with_a_newer_record_fails_the_step_with_what_to_do(
        kfp_local: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    """A real compiled file whose record template is of a format this distcomp does not read (as
    a newer distcomp would write it): the step's worker refuses it before anything is submitted."""
    mount = tmp_path / "volume"
    mount.mkdir()
    path = compile_component(ALLREDUCE, tmp_path / "c.yaml", nodes=2, image="registry.example/ddp:1",
                             shared_volume=(CLAIM, str(mount)))
    text = path.read_text()
    assert text.count(f"'distcomp_job': {VERSION}") == 1
    path.write_text(text.replace(f"'distcomp_job': {VERSION}", f"'distcomp_job': {VERSION + 1}"))
    with pytest.raises(RuntimeError, match="FAILURE"):
        pipeline_with(load_component_from_file(str(path)))()
    text = "".join(capfd.readouterr())
    assert f"a job record of format {VERSION + 1}" in text and f"reads (format {VERSION} and older)" in text
    assert "upgrade distcomp where the job runs (in the step's image" in text
    assert "distcomp submit exited with code 2" in text
    ran = text.split("distcomp step: ")[1].split("distcomp worker: ")  # the worker's one line, no traceback
    assert "Traceback" not in ran[0] and ran[1].startswith(str(mount / "distcomp")), text


def test_job_options_are_the_kubeflow_targets_options_the_step_does_not_set_itself() -> None:
    shared = (CLAIM, "/mnt/shared")

    def make(options: Any) -> Any:
        return load_component(ALLREDUCE, nodes=2, image="i:1", shared_volume=shared, job_options=options)

    with pytest.raises(KfpTargetError, match=r"'gpus' is not an option of the kubeflow target \(known: .*gpus_per_node"):
        make({"gpus": 1})
    with pytest.raises(KfpTargetError, match=r"the step sets volumes itself \(pass shared_volume="):
        make({"volumes": {"x": "/y"}})
    with pytest.raises(KfpTargetError, match="job_options: target 'kubeflow': option 'gpus_per_node' takes a int"):
        make({"gpus_per_node": "1"})
    with pytest.raises(KfpTargetError, match="job_options: target 'kubeflow': option 'backoff_limit' must be >= 0"):
        make({"backoff_limit": -1})
    with pytest.raises(KfpTargetError, match="job_options must map kubeflow target options to values"):
        make("--gpus-per-node=1")


def test_a_flag_list_is_refused_saying_to_give_the_options_by_name() -> None:
    """``distcomp submit`` flags as job_options, the older form, are no longer read
    (issue 35): a list is ``NAME=VALUE`` words, as ``--job-option`` takes them."""
    def source(options: Any) -> str:
        made = load_component(ALLREDUCE, nodes=2, image="i:1", shared_volume=(CLAIM, "/m"), job_options=options)
        return max(made.component_spec.implementation.container.command, key=len)

    new = {"memory": "3Gi", "gpus_per_node": 1, "env": {"A": "1"}, "gang": True}
    assert source(["memory=3Gi", "gpus_per_node=1", "env=A=1", "gang=true"]) == source(new)
    for old in (["--memory", "3Gi", "--gpus-per-node=1"], ["--gang"]):
        with pytest.raises(KfpTargetError, match=r"^job_options '--(memory|gang)': give the kubeflow target's options "
                                                 r"by name, not as flags: job_options=\{NAME: VALUE\} "
                                                 r"\(e.g. gpus_per_node=1\)$"):
            source(old)


def test_several_nodes_need_a_shared_volume_and_an_image(tmp_path: Path) -> None:
    with pytest.raises(KfpTargetError, match=r"2 nodes.*shared_volume=\(CLAIM, MOUNT_PATH\).*mount_pvc"):
        load_component(ALLREDUCE, nodes=2, image="i:1")
    with pytest.raises(KfpTargetError, match="pass image="):
        load_component(ALLREDUCE, nodes=2, shared_volume=(CLAIM, "/mnt"))
    for bad in (("Bad_Claim", "/mnt"), (CLAIM, "relative"), CLAIM):
        with pytest.raises(KfpTargetError, match="shared_volume must be"):
            load_component(ALLREDUCE, nodes=2, image="i:1", shared_volume=bad)  # type: ignore[arg-type]
    with pytest.raises(KfpTargetError, match=r"the step sets max_restarts itself \(the step's retry submits the "
                                             r"whole job again: pass max_restarts=K\)"):
        load_component(ALLREDUCE, nodes=2, image="i:1", shared_volume=(CLAIM, "/mnt"),
                       job_options={"max_restarts": 1})
