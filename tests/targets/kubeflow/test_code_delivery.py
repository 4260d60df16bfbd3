"""The code and packages reach pods whose image holds neither, and outputs outlast the pods.

The repository's example (examples/pytorch-ddp) is compiled for a PyTorchJob on an image that
has only Python and torch: a clean virtualenv with nothing but torch stands in for it (no
distcomp, no code). Its code travels in the ConfigMap distcomp makes, mounted as the code
folder (``_kubelet``); a package the command needs is pip-installed in each pod first; the
model lands on the job's PersistentVolumeClaim. Then the compile-time rules: where outputs go,
and the error for one that would be lost with its pod.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from distcomp.spec import load
from distcomp.targets.kubeflow._code import CODE_DIR, CONFIGMAP_MAX, plan_code
from distcomp.targets.kubeflow._compile import CompileError
from distcomp.targets.kubeflow._job import job_of
from distcomp.core.plan import make_plan

from tests._s3server import S3Server

from ._kubelet import mounted, prepare, resolve_secrets, run_inits, writable
from ._operator import LOCALHOST, Pod, _items, free_ports, pytorchjob_pods, run_pods
from .test_manifests import MODELS, validate

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "pytorch-ddp" / "component.yaml"


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirements(name: str) -> set[str]:
    """``name`` and every distribution it requires (no extras), by their metadata names."""
    import importlib.metadata as md

    from packaging.requirements import Requirement

    found: set[str] = set()
    todo = [name]
    while todo:
        dist = md.distribution(todo.pop())
        if _normal(dist.metadata["Name"]) in found:
            continue
        found.add(_normal(dist.metadata["Name"]))
        todo += [r.name for r in map(Requirement, dist.requires or ()) if r.marker is None or r.marker.evaluate({"extra": ""})]
    return found


@pytest.fixture(scope="module")
def image(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An "image" with only Python, pip and torch: a clean virtualenv whose site-packages links
    this venv's pip, torch and what torch requires, each package's folders and its dist-info (pip
    installing the 200 MB wheel again cost each worker a minute of the suite) and the scripts
    pip would write for their console entry points (torchrun, pip)."""
    import importlib.metadata as md
    import sysconfig

    venv = tmp_path_factory.mktemp("image") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = venv / Path(sysconfig.get_path("purelib")).relative_to(sysconfig.get_path("data"))
    for name in _requirements("torch") | {"pip"}:
        dist = md.distribution(name)
        tops = {Path(str(f)).parts[0] for f in dist.files or () if not str(f).startswith(("..", "__pycache__"))}
        for top in tops:
            source = Path(str(dist.locate_file(top)))
            if source.exists() and not (site / top).exists():
                (site / top).symlink_to(source)
        for entry in dist.entry_points.select(group="console_scripts"):  # torchrun, as pip writes it
            script = venv / "bin" / entry.name
            script.write_text(f"#!{venv / 'bin' / 'python'}\nimport sys\nfrom {entry.module} import {entry.attr}\n"
                              f"sys.exit({entry.attr}())\n")
            script.chmod(0o755)
    shown = subprocess.run([str(venv / "bin" / "python"), "-c", "import torch; print(torch.__version__)"],
                           capture_output=True, text=True)
    assert shown.returncode == 0 and shown.stdout.startswith("2.13.0"), shown.stderr
    return venv


def _wheel(folder: Path, name: str = "tinypkg", version: str = "1.0") -> Path:
    """A pure-Python wheel written by hand (no build backend needed), for pip's --find-links."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}-{version}-py3-none-any.whl"
    info = f"{name}-{version}.dist-info"
    files = {f"{name}/__init__.py": f"VERSION = {version!r}\n".encode(),
             f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode(),
             f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    record = "".join(f"{p},sha256={base64.urlsafe_b64encode(hashlib.sha256(d).digest()).rstrip(b'=').decode()},"
                     f"{len(d)}\n" for p, d in files.items()) + f"{info}/RECORD,,\n"
    with zipfile.ZipFile(path, "w") as zf:
        for p, d in files.items():
            zf.writestr(p, d)
        zf.writestr(f"{info}/RECORD", record)
    return path


@pytest.mark.slow
def test_the_example_runs_on_a_python_and_torch_image_from_a_configmap(tmp_path: Path, image: Path) -> None:
    assert subprocess.run([str(image / "bin" / "python"), "-c", "import distcomp"],
                          capture_output=True).returncode != 0, "the stand-in image must not hold distcomp"
    wheels = _wheel(tmp_path / "wheels").parent
    spec = load(str(EXAMPLE)).with_overrides(nodes=2)
    job = job_of(make_plan(spec, gpu=False), {"inputs": {"epochs": "1", "samples": "256"}, "volumes": {"results": "/results"},
                        "packages": ["tinypkg==1.0"], "name": "ddp",
                        # pip in the pods reads its index from the env; here: the local wheel only
                        "env": {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(wheels)}})
    assert job.code.mode == "configmap" and "small enough" in job.code.why
    configmap, manifest = job.objects()
    validate(manifest)  # the CRD's schema, unknown fields refused
    assert configmap["kind"] == "ConfigMap" and configmap["metadata"]["name"] == "ddp-code"
    files = {i["path"] for i in manifest["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["volumes"][-1]
             ["configMap"]["items"]}
    assert files == {"component.yaml", "train.py"}
    compiled = yaml.safe_load_all(yaml.safe_dump_all(job.objects()))  # what `compile` prints loads back
    assert [o["kind"] for o in compiled] == ["ConfigMap", "PyTorchJob"]

    pods = pytorchjob_pods(manifest)
    port = free_ports(1)[0]
    pods = [p.with_env(MASTER_ADDR=LOCALHOST, MASTER_PORT=str(port)) for p in pods]
    path = ":".join([str(image / "bin"), "/usr/local/bin", "/usr/bin", "/bin"])
    inits, mains = prepare(manifest, pods, tmp_path / "cluster", {configmap["metadata"]["name"]: configmap},
                           {"PATH": path, "VIRTUAL_ENV": str(image)})
    assert inits == []  # a ConfigMap needs no fetching
    try:
        run_inits(inits, tmp_path, tmp_path / "logs")
        done = run_pods(mains, tmp_path, tmp_path / "logs", timeout=240)
        assert set(done.codes.values()) == {0}, done.explain()
        code = tmp_path / "cluster" / "pods" / mains[0].name / "distcomp-code"
        assert (code / "train.py").read_bytes() == (EXAMPLE.parent / "train.py").read_bytes()
        assert (code / "train.py").stat().st_mode & 0o777 == 0o644  # the item's mode
    finally:
        writable(tmp_path / "cluster")
    model = tmp_path / "cluster" / "pvc" / "results" / "distcomp" / "ddp" / "outputs" / "model"
    assert (model / "model.pt").is_file(), done.explain()
    metrics = json.loads((model / "metrics.json").read_text())
    assert metrics["world_size"] == 4, metrics
    shown = subprocess.run([str(image / "bin" / "python"), "-c", "import tinypkg; print(tinypkg.VERSION)"],
                           capture_output=True, text=True)
    assert shown.stdout.strip() == "1.0"  # installed in the pods by pip before the command


@pytest.mark.slow
def test_the_example_fetches_its_code_from_the_store_and_its_model_comes_back(
        tmp_path: Path, image: Path, s3_server: S3Server, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    """--store: submit uploads the code (once: content-addressed), each pod's init container
    fetches and checks it with only Python, node 0 uploads the model, submit downloads it."""
    from distcomp.delivery.store import StoreURI, download_tree
    from distcomp.delivery.transfer import upload
    from distcomp.targets.kubeflow._transfer import download

    for name, value in s3_server.env().items():
        monkeypatch.setenv(name, value)
    store = f"s3://{s3_server.bucket}/jobs-{tmp_path.name}"
    spec = load(str(EXAMPLE)).with_overrides(nodes=2)
    job = job_of(make_plan(spec, gpu=False), {"inputs": {"epochs": "1", "samples": "256"}, "store": store, "store_secret": "s3-creds",
                        "name": "ddp"})
    assert job.code.mode == "store" and job.code.key.startswith(f"jobs-{tmp_path.name}/code/sha256-")
    assert job.outputs.where == {"model": f"{store}/outputs/ddp/model/"}
    text = yaml.safe_dump_all(job.objects())
    assert s3_server.secret_key not in text and s3_server.access_key not in text  # credentials stay in the Secret
    validate(job.manifest)

    said: list[str] = []
    upload(job.code, said.append)
    upload(job.code, said.append)
    assert said[1].endswith(" uploaded") and said[3].endswith("already in the store, not uploaded again"), said

    creds = {"AWS_ACCESS_KEY_ID": s3_server.access_key, "AWS_SECRET_ACCESS_KEY": s3_server.secret_key}
    manifest = resolve_secrets(job.manifest, {"s3-creds": creds})  # the kubelet reads the Secret
    port = free_ports(1)[0]
    pods = [p.with_env(MASTER_ADDR=LOCALHOST, MASTER_PORT=str(port)) for p in pytorchjob_pods(manifest)]
    clean = {"PATH": ":".join([str(image / "bin"), "/usr/local/bin", "/usr/bin", "/bin"]), "VIRTUAL_ENV": str(image)}
    inits, mains = prepare(manifest, pods, tmp_path / "cluster", {}, clean)
    assert [p.name for p in inits] == ["ddp-master-0-init-0", "ddp-worker-0-init-0"]
    run_inits(inits, tmp_path, tmp_path / "logs")
    code = tmp_path / "cluster" / "pods" / "ddp-worker-0" / "distcomp-code"
    assert (code / "train.py").read_bytes() == (EXAMPLE.parent / "train.py").read_bytes()
    done = run_pods(mains, tmp_path, tmp_path / "logs", timeout=240)
    assert set(done.codes.values()) == {0}, done.explain()
    assert "uploaded" in (tmp_path / "logs" / "ddp-master-0.log").read_text()
    assert "uploaded" not in (tmp_path / "logs" / "ddp-worker-0.log").read_text()  # node 0 only

    uploaded = download_tree(StoreURI(s3_server.bucket, job.outputs.uploads["model"]), tmp_path / "check",
                             s3_server.env())
    assert sorted(p.name for p in uploaded) == ["metrics.json", "model.pt"]
    got = download(job, tmp_path / "downloads", said.append)  # what `submit --download DIR` does
    assert got == {"model": str(tmp_path / "downloads" / "model")}
    assert json.loads((tmp_path / "downloads" / "model" / "metrics.json").read_text())["world_size"] == 4


@pytest.mark.slow
def test_a_trainjob_node_fetches_its_code_and_uploads_its_model(
        tmp_path: Path, image: Path, s3_server: S3Server, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    """A TrainJob's runtime makes the pods and takes no init container: the trainer's own
    command fetches the code, runs torchrun (from the runtime's PET_* variables), and uploads."""
    from distcomp.targets.kubeflow._outputs import STORE_DIR
    from distcomp.delivery.store import StoreURI, download_tree
    from distcomp.delivery.transfer import upload

    for name, value in s3_server.env().items():
        monkeypatch.setenv(name, value)
    spec = load(str(EXAMPLE))  # one node, 2 processes
    job = job_of(make_plan(spec, gpu=False), {"inputs": {"epochs": "1", "samples": "256"}, "store": f"s3://{s3_server.bucket}/tj",
                        "store_secret": "s3-creds", "name": "tj", "trainer_v2": True})
    validate(job.manifest)
    upload(job.code, lambda _m: None)
    creds = {"AWS_ACCESS_KEY_ID": s3_server.access_key, "AWS_SECRET_ACCESS_KEY": s3_server.secret_key}
    trainer = resolve_secrets(job.manifest, {"s3-creds": creds})["spec"]["trainer"]
    port = free_ports(1)[0]
    # what Trainer's torch-distributed runtime gives node 0 (torchrun reads PET_* as its defaults)
    runtime = [("PET_NNODES", "1"), ("PET_NPROC_PER_NODE", "2"), ("PET_NODE_RANK", "0"),
               ("PET_MASTER_ADDR", LOCALHOST), ("PET_MASTER_PORT", str(port))]
    clean = {"PATH": ":".join([str(image / "bin"), "/usr/local/bin", "/usr/bin", "/bin"]), "VIRTUAL_ENV": str(image)}
    folders = {CODE_DIR: tmp_path / "code", STORE_DIR: tmp_path / "outputs"}  # the patch's emptyDirs
    for folder in folders.values():
        folder.mkdir()
    pod = mounted(Pod("tj-node-0-0", "node", 0, tuple(trainer["command"]), (*_items(trainer), *runtime), None,
                      clean), folders)
    done = run_pods([pod], tmp_path, tmp_path / "logs", timeout=240)
    assert done.codes[pod.name] == 0, done.explain()
    assert (tmp_path / "code" / "train.py").read_bytes() == (EXAMPLE.parent / "train.py").read_bytes()
    back = download_tree(StoreURI(s3_server.bucket, job.outputs.uploads["model"]), tmp_path / "back", s3_server.env())
    assert sorted(p.name for p in back) == ["metrics.json", "model.pt"]
    assert json.loads((tmp_path / "back" / "metrics.json").read_text())["world_size"] == 2


@pytest.mark.slow
@pytest.mark.parametrize("code", ["configmap", "image"])
def test_outputs_go_to_the_store_whichever_way_the_code_goes(code: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://minio.example:9000")
    job = job_of(make_plan(load(str(EXAMPLE)), gpu=False), _options(code=code, store="s3://bucket/team", store_secret="s3-creds"))
    assert job.code.mode == code and [o["kind"] for o in job.objects()][-1] == "PyTorchJob"
    assert job.outputs.where == {"model": "s3://bucket/team/outputs/ddp/model/"}
    master = job.manifest["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]
    env = {e["name"]: e for e in master["containers"][0]["env"]}
    assert env["AWS_ENDPOINT_URL"]["value"] == "http://minio.example:9000"
    assert env["AWS_SECRET_ACCESS_KEY"]["valueFrom"]["secretKeyRef"]["name"] == "s3-creds"
    assert "initContainers" not in master  # nothing to fetch: the code is not in the store
    validate(job.manifest)


def test_outputs_go_to_the_store_only_from_a_job_whose_node_0_ends(tmp_path: Path) -> None:
    mpi = ROOT / "components" / "mpi-allreduce-bench" / "component.yaml"
    spec = load(str(mpi))
    with pytest.raises(CompileError, match="a MPIJob cannot upload its outputs .* give --volume CLAIM:/data"):
        job_of(make_plan(spec, gpu=False), {"store": "s3://bucket/p", "name": "mpi"})


def _options(**more: Any) -> dict[str, Any]:
    return {"inputs": {"epochs": "1"}, "name": "ddp", **more}


def test_an_output_on_the_pods_own_disk_is_a_compile_error() -> None:
    spec = load(str(EXAMPLE))
    with pytest.raises(CompileError) as err:
        job_of(make_plan(spec, gpu=False), _options())
    text = str(err.value)
    assert "output 'model' would be written to /outputs/model on the pod's own disk" in text
    assert "--volume CLAIM:/data" in text and "--store s3://" in text and "--scratch model" in text
    assert job_of(make_plan(spec, gpu=False), _options(scratch=["model"])).outputs.where == {"model": "scratch (lost with the pod)"}
    with pytest.raises(CompileError, match="--scratch nope: no such output"):
        job_of(make_plan(spec, gpu=False), _options(scratch=["nope"]))


def test_outputs_default_to_the_first_volume_and_a_given_path_must_be_on_one() -> None:
    spec = load(str(EXAMPLE))
    job = job_of(make_plan(spec, gpu=False), _options(volumes={"data": "/data", "more": "/more"}))
    assert job.outputs.paths == {"model": "/data/distcomp/ddp/outputs/model"}
    assert job.outputs.where == {"model": "pvc data:/data/distcomp/ddp/outputs/model"}
    assert "--model-dir /data/distcomp/ddp/outputs/model" in " ".join(
        job.manifest["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["command"])
    given = job_of(make_plan(spec, gpu=False), _options(volumes={"data": "/data", "more": "/more"}, output_paths={"model": "/more/m"}))
    assert given.outputs.where == {"model": "pvc more:/more/m"}
    with pytest.raises(CompileError, match="/elsewhere/m on the pod's own disk"):
        job_of(make_plan(spec, gpu=False), _options(volumes={"data": "/data"}, output_paths={"model": "/elsewhere/m"}))
    with pytest.raises(CompileError, match="give an absolute path"):
        job_of(make_plan(spec, gpu=False), _options(volumes={"data": "/data"}, output_paths={"model": "rel/m"}))


def test_how_the_code_gets_there_is_chosen_and_said(tmp_path: Path) -> None:
    spec = load(str(EXAMPLE))
    assert plan_code(spec, {}, {}).mode == "configmap"
    by_workdir = plan_code(spec, {"workdir": "/data/code"}, {})
    assert (by_workdir.mode, by_workdir.why) == ("image", "--workdir /data/code given: the code is expected there")
    image_job = job_of(make_plan(spec, gpu=False), _options(scratch=["model"], code="image"))
    pod = image_job.manifest["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]
    assert "workingDir" not in pod["containers"][0] and all(v["name"] != "distcomp-code" for v in pod["volumes"])
    assert [o["kind"] for o in image_job.objects()] == ["PyTorchJob"]
    assert image_job.notes()[0] == "code: the image's (--code image)"

    big = tmp_path / "big"
    big.mkdir()
    (big / "component.yaml").write_text(EXAMPLE.read_text())
    (big / "train.py").write_text((EXAMPLE.parent / "train.py").read_text())
    (big / "weights.bin").write_bytes(bytes(range(256)) * (CONFIGMAP_MAX // 256))  # base64 makes it larger
    large = load(str(big / "component.yaml"))
    auto = plan_code(large, {}, {})
    assert auto.mode == "image" and "too large for a ConfigMap" in auto.why and "--store" in auto.why
    with pytest.raises(CompileError, match="over a ConfigMap's"):
        plan_code(large, {"code": "configmap"}, {})
    with pytest.raises(CompileError, match="--code store needs --store"):
        plan_code(spec, {"code": "store"}, {})
    with pytest.raises(CompileError, match="--code nope: give one of auto, image, configmap, store"):
        plan_code(spec, {"code": "nope"}, {})
    with pytest.raises(CompileError, match="not a pip option"):
        plan_code(spec, {"packages": ["--index-url=http://x"]}, {})


def test_the_configmap_holds_binary_files_and_modes(tmp_path: Path) -> None:
    folder = tmp_path / "c"
    (folder / "sub dir").mkdir(parents=True)
    (folder / "component.yaml").write_text(EXAMPLE.read_text())
    (folder / "train.py").write_text("print('hi')\n")
    (folder / "sub dir" / "run.sh").write_text("#!/bin/sh\necho hi\n")
    (folder / "sub dir" / "run.sh").chmod(0o755)
    (folder / "blob.bin").write_bytes(b"\xff\x00\xfe")
    (folder / ".env").write_text("SECRET=1\n")  # local secrets never leave the machine
    job = job_of(make_plan(load(str(folder / "component.yaml")), gpu=False), _options(scratch=["model"]))
    configmap, manifest = job.objects()
    volume = manifest["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["volumes"][-1]
    items = {i["path"]: i for i in volume["configMap"]["items"]}
    assert sorted(items) == ["blob.bin", "component.yaml", "sub dir/run.sh", "train.py"]
    assert items["sub dir/run.sh"]["mode"] == 0o755 and items["train.py"]["mode"] == 0o644
    assert base64.b64decode(configmap["binaryData"][items["blob.bin"]["key"]]) == b"\xff\x00\xfe"
    assert configmap["data"][items["train.py"]["key"]] == "print('hi')\n"
    assert all(set(k) <= set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._")
               for k in [*configmap["data"], *configmap["binaryData"]])
    main = manifest["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]
    assert main["workingDir"] == CODE_DIR
    assert {"name": "distcomp-code", "mountPath": CODE_DIR, "readOnly": True} in main["volumeMounts"]


@pytest.mark.slow
@pytest.mark.parametrize("job, trainer_v2", [("torch", False), ("mpi", False), ("tensorflow", False),
                                             ("deepspeed", False), ("torch", True)])
@pytest.mark.parametrize("code", ["configmap", "store"])
def test_every_kind_carries_the_code_and_packages_within_its_crd(job: str, trainer_v2: bool, code: str) -> None:
    path = ROOT / "tests" / "launchers" / "jobs" / job / "component.yaml"
    store = {"store": "s3://bucket/team", "store_secret": "s3-creds"} if code == "store" else {}
    built = job_of(make_plan(load(str(path)).with_overrides(nodes=2), gpu=False), {
        "image": "i:1", "name": "j", "code": code, "packages": ["numpy>=2", "tinypkg"], "trainer_v2": trainer_v2,
        "volumes": {"data": "/data"}, **store})
    manifest = built.manifest
    validate(manifest)  # nothing the API server would prune: the code would silently not arrive
    if manifest["kind"] in MODELS:  # and the kubeflow-training SDK's typed model knows every field
        from kubeflow.training import ApiClient

        client = ApiClient()

        class Response:
            data = json.dumps(manifest)

        assert client.sanitize_for_serialization(client.deserialize(Response(), MODELS[manifest["kind"]])) == manifest
    text = json.dumps(manifest)
    assert "pip install --quiet --no-cache-dir --disable-pip-version-check 'numpy>=2' tinypkg" in text
    if manifest["kind"] == "TrainJob":
        command = " ".join(manifest["spec"]["trainer"]["command"])
        assert f"cd {CODE_DIR}" in command and ("fetch bucket team/code/sha256-" in command) == (code == "store")
        return
    for replica in next(v for k, v in manifest["spec"].items() if k.endswith("ReplicaSpecs")).values():
        pod = replica["template"]["spec"]
        assert any(v["name"] == "distcomp-code" for v in pod["volumes"])
        assert {m["mountPath"] for m in pod["containers"][0]["volumeMounts"]} >= {"/data", CODE_DIR}
        fetchers = [c for c in pod.get("initContainers", []) if c["name"] == "distcomp-code"]
        assert len(fetchers) == (code == "store")
        if fetchers:
            assert fetchers[0]["envFrom"] == [{"secretRef": {"name": "s3-creds"}}]
            assert fetchers[0]["command"][:2] == ["python", "-c"] and fetchers[0]["command"][3] == "fetch"


def test_an_mpijob_worker_is_ready_only_once_its_packages_are_installed() -> None:
    """mpi-operator starts the launcher once every worker is ready: the worker's readiness is
    the file its install step writes, so mpirun never starts a rank before its packages."""
    path = ROOT / "tests" / "launchers" / "jobs" / "mpi" / "component.yaml"
    manifest = job_of(make_plan(load(str(path)).with_overrides(nodes=2), gpu=False), {"image": "i:1", "name": "j", "code": "image",
                                                                "packages": ["numpy"], "scratch": ["result"]}).manifest
    worker = manifest["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    probe = worker["readinessProbe"]["exec"]["command"]
    assert probe[:2] == ["test", "-e"] and f"&& touch {probe[2]} && exec" in worker["command"][2]
    assert worker["command"][3:] == ["/usr/sbin/sshd", "-De"]
    launcher = manifest["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]
    assert "readinessProbe" not in launcher and "touch" not in launcher["command"][2]


def test_download_says_when_nothing_was_uploaded(tmp_path: Path, s3_server: S3Server,  # noqa: F811
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    from distcomp.targets.kubeflow._transfer import download

    for name, value in s3_server.env().items():
        monkeypatch.setenv(name, value)
    job = job_of(make_plan(load(str(EXAMPLE)), gpu=False), _options(store=f"s3://{s3_server.bucket}/empty-{tmp_path.name}"))
    said: list[str] = []
    assert download(job, tmp_path / "out", said.append) == {}
    assert said == [f"warning: output 'model': nothing under s3://{s3_server.bucket}/empty-{tmp_path.name}"
                    "/outputs/ddp/model/"]
    assert not (tmp_path / "out" / "model").exists()


@pytest.mark.slow
def test_a_function_components_project_travels_in_the_configmap(tmp_path: Path) -> None:
    """A function component's spec has no file: its project folder is the code that goes, by the
    same rules (the sibling module in, what .gitignore and .distcompignore leave out, out)."""
    from distcomp.function._reference import load_reference

    from ...function.cluster import SHIPPED, write_project

    proj = write_project(tmp_path)
    try:
        train = load_reference(f"{proj / 'train.py'}:train")
        assert train.spec.source is None
        job = job_of(make_plan(train.spec, gpu=False), {"volumes": {"result": "/results"}, "name": "fn", "code": "configmap",
                                  "image": "python:3.11"})
    finally:  # read from the file (not imported): nothing to undo unless the reading fell back to an import
        if str(proj) in sys.path:
            sys.path.remove(str(proj))
        for name in ("train", "helpers"):
            sys.modules.pop(name, None)
    assert job.code.mode == "configmap"
    configmap, manifest = job.objects()
    validate(manifest)
    files = {i["path"] for i in manifest["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["volumes"][-1]
             ["configMap"]["items"]}
    assert files == set(SHIPPED)
