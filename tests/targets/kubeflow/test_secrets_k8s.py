"""On Kubernetes a secret is a ``Secret``: ``compile --target kubeflow`` shows and writes no
secret-named value in clear. The job takes each from the Secret ``JOB-secrets`` through
``secretKeyRef`` (a command word or another variable through ``$(DISTCOMP_SECRET_N)``, which the
kubelet expands); ``--out FILE`` writes the Secret beside FILE, mode 600. The pods (emulated
kubelet and operator, real processes) still get every value exactly."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from distcomp.spec import load
from distcomp.targets.kubeflow._job import job_of
from distcomp.core.plan import make_plan

from ._kubelet import resolve_secrets
from ._operator import container_env, pytorchjob_pods, run_pods
from ._scratch import job_doc
from .test_manifests import JOBS, validate

# a value with everything a manifest or a shell line could mangle: a space, $(..), quotes
TOKEN = "tok $(HOME) it's \"q\" $$x"
AUTH = "cloud-auth-7f3a9"
SHOW = """\
import json, os, sys
json.dump({"argv": sys.argv[1:], "auth": os.environ.get("CLOUD_AUTH"), "url": os.environ.get("DB_URL")},
          open(os.environ["OUT_FILE"], "w"))
"""
STEP = """\
$schema: https://azuremlschemas.azureedge.net/latest/commandJob.schema.json
command: python show.py --token ${{inputs.api_token}} --n 1
code: .
inputs:
  api_token:
    type: string
environment:
  image: python:3.11-slim
"""


def _compile(folder: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "distcomp", "compile", "--target", "kubeflow", str(folder / "step.yml"),
            "--code", "image", "-i", f"api_token={TOKEN}", "--env", f"CLOUD_AUTH={AUTH}",
            "--env", f"DB_URL=pg://u:{AUTH}@h/db", "--env", "OUT_FILE=seen.json", *extra]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=folder)


def _clear(text: str) -> bool:
    return TOKEN in text or AUTH in text or json.dumps(TOKEN)[1:-1] in text or "tok $$(HOME)" in text


@pytest.mark.slow
def test_compile_shows_no_secret_and_the_pod_gets_each_exactly(tmp_path: Path) -> None:
    (tmp_path / "step.yml").write_text(STEP)
    (tmp_path / "show.py").write_text(SHOW)
    shown = _compile(tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert not _clear(shown.stdout) and not _clear(shown.stderr)
    # stdout: the job, and the Secret it needs as comments, every value masked
    assert "secretKeyRef" in shown.stdout and "#   DISTCOMP_SECRET_0: '***'" in shown.stdout
    assert "step-secrets" in shown.stderr

    out = tmp_path / "job.yaml"
    wrote = _compile(tmp_path, "--out", str(out))
    assert wrote.returncode == 0, wrote.stderr
    assert not _clear(wrote.stdout + wrote.stderr) and not _clear(out.read_text())
    secret_file = tmp_path / "job.secret.yaml"
    assert stat.S_IMODE(secret_file.stat().st_mode) == 0o600 and "job.secret.yaml" not in wrote.stdout
    assert f"wrote the Secret step-secrets beside {out}" in wrote.stderr
    secret = yaml.safe_load(secret_file.read_text())
    assert (secret["kind"], secret["metadata"]["name"]) == ("Secret", "step-secrets")
    assert TOKEN in secret["stringData"].values() and AUTH in secret["stringData"].values()

    manifest = job_doc(out.read_text())
    validate(manifest)  # still the real CRD's schema, nothing the API server would prune
    main = manifest["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]
    auth = next(e for e in main["env"] if e["name"] == "CLOUD_AUTH")
    assert auth == {"name": "CLOUD_AUTH", "valueFrom": {"secretKeyRef": {"name": "step-secrets", "key": auth[
        "valueFrom"]["secretKeyRef"]["key"]}}}
    # the kubelet reads the Secret, expands $(DISTCOMP_SECRET_N), and the program gets its words
    pods = pytorchjob_pods(resolve_secrets(manifest, {"step-secrets": secret["stringData"]}))
    done = run_pods(pods, tmp_path, tmp_path / "logs", timeout=60)
    assert set(done.codes.values()) == {0}, done.explain()
    seen = json.loads((tmp_path / "seen.json").read_text())
    assert seen == {"argv": ["--token", TOKEN, "--n", "1"], "auth": AUTH, "url": f"pg://u:{AUTH}@h/db"}

    # compiling again replaces distcomp's own Secret file; a file distcomp did not write is refused
    again = _compile(tmp_path, "--out", str(out))
    assert again.returncode == 0, again.stderr
    secret_file.unlink()
    secret_file.write_text("mine\n")
    out.unlink()
    refused = _compile(tmp_path, "--out", str(out))
    assert refused.returncode == 2 and "job.secret.yaml exists and is not a Secret distcomp wrote" in refused.stderr
    assert "Traceback" not in refused.stderr and not out.exists() and secret_file.read_text() == "mine\n"


def _containers(node: Any) -> list[dict[str, Any]]:
    """Every container (and a TrainJob's trainer) of a manifest."""
    found = []
    if isinstance(node, dict):
        if "command" in node or "env" in node:
            found.append(node)
        for value in node.values():
            found += _containers(value)
    elif isinstance(node, list):
        for value in node:
            found += _containers(value)
    return found


@pytest.mark.slow
@pytest.mark.parametrize("job, trainer_v2", [("torch", False), ("mpi", False), ("tensorflow", False),
                                             ("torch", True)])
def test_every_kind_takes_its_secrets_from_the_secret(job: str, trainer_v2: bool) -> None:
    spec = load(str(JOBS / job / "component.yaml")).with_overrides(nodes=2)
    built = job_of(make_plan(spec, gpu=False), {"image": "i:1", "name": "j", "code": "image", "trainer_v2": trainer_v2,
                          "scratch": list(spec.outputs),
                          "env": {"CLOUD_AUTH": AUTH, "DB_URL": f"pg://u:{AUTH}@h/db", "PLAIN": "$(HOME)"}})
    manifest = built.manifest
    validate(manifest)
    assert AUTH not in json.dumps(manifest) and built.secret is not None
    assert built.secret["metadata"]["name"] == "j-secrets" and AUTH in built.secret["stringData"].values()
    resolved = resolve_secrets(manifest, {"j-secrets": built.secret["stringData"]})
    envs = [container_env((e["name"], str(e.get("value", ""))) for e in c.get("env") or [])
            for c in _containers(resolved["spec"]) if any(e["name"] == "CLOUD_AUTH" for e in c.get("env") or [])]
    assert envs, "no container got CLOUD_AUTH"
    for env in envs:
        assert (env["CLOUD_AUTH"], env["DB_URL"]) == (AUTH, f"pg://u:{AUTH}@h/db")
    if manifest["kind"] == "MPIJob":  # mpirun forwards it to the ranks by name
        launcher = manifest["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]
        assert "CLOUD_AUTH" in launcher["command"]


def test_a_job_without_secrets_has_no_secret() -> None:
    built = job_of(make_plan(load(str(JOBS / "torch" / "component.yaml")), gpu=False), {"image": "i:1", "code": "image",
                                                                    "scratch": ["result"], "env": {"EPOCHS": "3"}})
    assert built.secret is None and "DISTCOMP_SECRET" not in json.dumps(built.manifest)


@pytest.mark.slow
def test_submit_creates_the_secret_owned_by_the_job(tmp_path: Path, mlflow_server: str) -> None:  # noqa: F811
    from .test_submit import FakeApi, condition, kubeconfig

    (tmp_path / "step.yml").write_text(STEP)
    (tmp_path / "show.py").write_text(SHOW)
    with FakeApi([[condition("Succeeded", "PyTorchJobSucceeded", "done")]], name="step") as api:
        argv = [sys.executable, "-m", "distcomp", "submit", "--target", "kubeflow",
                str(tmp_path / "step.yml"), "--code", "image",
                "-i", f"api_token={TOKEN}", "--env", f"CLOUD_AUTH={AUTH}", "--namespace", "ml",
                "--kubeconfig", str(kubeconfig(tmp_path, api)), "--poll", "0.05", "--experiment", "k8s-secrets"]
        env = {k: v for k, v in os.environ.items() if k not in ("KUBERNETES_SERVICE_HOST", "MLFLOW_RUN_ID")}
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=tmp_path,
                              env={**env, "MLFLOW_TRACKING_URI": mlflow_server})
    assert proc.returncode == 0, proc.stderr
    assert not _clear(proc.stdout + proc.stderr)
    (job,) = [body for method, path, body in api.requests if method == "POST" and path.endswith("/pytorchjobs")]
    assert not _clear(json.dumps(job))
    (secret,) = [body for method, path, body in api.requests if path == "/api/v1/namespaces/ml/secrets"]
    assert secret["metadata"]["name"] == "step-secrets" and secret["metadata"]["ownerReferences"] == [
        {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": "step", "uid": "1234"}]
    assert TOKEN in secret["stringData"].values() and AUTH in secret["stringData"].values()


@pytest.mark.slow
def test_a_secret_in_the_node_agents_record_reaches_every_rank(tmp_path: Path) -> None:
    """A launcher without a Kubeflow job of its own: the command travels inside the agent's JSON
    record, a word of the pod's command; the secret in it is a reference too."""
    from ..._dists import install
    from ...test_plugins import example_code
    from .test_agent_job import RANK
    from ._operator import LOCALHOST
    from distcomp.core.hookspec import DistcompSpecs

    site = tmp_path / "site"
    install(site, "mypkg", "mypkg", example_code(DistcompSpecs.distcomp_launchers.__doc__ or ""),
            "[distcomp]\nmine = mypkg\n")
    code, out = tmp_path / "code", tmp_path / "out"
    code.mkdir()
    out.mkdir()
    (code / "rank.py").write_text(RANK)
    (code / "component.yaml").write_text(
        "name: mine-job\ntype: DistributedComponent\n"
        "inputs:\n  dest: {type: String}\n  msg_token: {type: String}\n"
        "launcher:\n  type: mine\n"
        "  additional_arguments: python rank.py {inputs.dest} -1 {inputs.msg_token}\n")
    proc = subprocess.run([sys.executable, "-m", "distcomp", "compile", "--target", "kubeflow",
                           str(code / "component.yaml"), "--nodes", "2", "--image", "python:3.11", "--code", "image",
                           "-i", f"msg_token={TOKEN}", "-i", f"dest={out}", "--out", str(tmp_path / "job.yaml")],
                          capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(site)})
    assert proc.returncode == 0, proc.stderr
    text = (tmp_path / "job.yaml").read_text()
    assert not _clear(text) and not _clear(proc.stdout + proc.stderr)
    manifest = job_doc(text)
    validate(manifest)
    secret = yaml.safe_load((tmp_path / "job.secret.yaml").read_text())
    resolved = resolve_secrets(manifest, {"mine-job-secrets": secret["stringData"]})
    pods = [p.with_env(MASTER_ADDR=LOCALHOST) for p in pytorchjob_pods(resolved)]
    done = run_pods(pods, code, tmp_path / "logs", timeout=120)
    assert set(done.codes.values()) == {0}, done.explain()
    records = {int(p.stem[4:]): json.loads(p.read_text()) for p in out.glob("rank*.json")}
    assert sorted(records) == [0, 1] and {r["msg"] for r in records.values()} == {TOKEN}
