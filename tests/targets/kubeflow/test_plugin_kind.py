"""A launcher plugin that brings its own Kubeflow job kind is compiled AND submitted: the
kind's record (API version, plural, leading pod) is all the target needs (it used to compile,
then fail `distcomp submit` on a KeyError in a table of the built-in kinds)."""

from __future__ import annotations

import pytest
import os
import subprocess
import sys
import types
from pathlib import Path


from distcomp.core.plan import make_plan
from distcomp.core.plugins import PluginManager, get_plugin_manager
from distcomp.spec import loads
from distcomp.targets.kubeflow import compile_job, job_type_of, submit_and_wait

from ..._dists import install as install_dist
from .test_submit import FakeApi, condition, kubeconfig
from ._scratch import job_doc

SOLO = "/apis/example.org/v1/namespaces/ml/solojobs"
LEADER = "example.org/role=leader"
PLUGIN = '''
from distcomp.core.hookspec import hookimpl
from distcomp.core.kinds import KUBEFLOW, NativeMapping
from distcomp.records import COMMAND, LauncherType, Replica, Topology


def topology(spec):
    nodes = spec.distribution.nodes
    replicas = tuple(Replica(role="worker", index=i, node=i, rank=i, argv=(COMMAND,)) for i in range(nodes))
    return Topology(launcher="solo", nodes=nodes, processes_per_node=1, world_size=nodes, replicas=replicas)


def build(spec, options):
    return {"apiVersion": "example.org/v1", "kind": "SoloJob",
            "metadata": {"name": options.name, "namespace": options.namespace},
            "spec": {"pods": len(options.topology.replicas), "command": list(options.command)}}


@hookimpl
def distcomp_launchers():
    yield LauncherType(name="solo", factory=topology, description="one process per node")


@hookimpl
def distcomp_native_mappings():
    yield NativeMapping("solo", KUBEFLOW, "SoloJob", {"build": build, "api_version": "example.org/v1",
                        "plural": "solojobs", "leader": "example.org/job={name},example.org/role=leader"})
'''
SPEC = "name: solo\ntype: DistributedComponent\nlauncher:\n  type: solo\n  process_count_per_node: 1\n" \
       "  additional_arguments: python run.py\n"


def install(site: Path) -> None:
    install_dist(site, "solokind", "solokind", PLUGIN, "[distcomp]\nsolo = solokind\n", "1.0")


@pytest.mark.slow
def test_an_installed_plugin_kind_is_compiled_and_submitted_by_the_cli(tmp_path: Path) -> None:
    install(tmp_path / "site")
    spec = tmp_path / "solo.yaml"
    spec.write_text(SPEC, encoding="utf-8")
    env = {**{k: v for k, v in os.environ.items() if k not in ("KUBERNETES_SERVICE_HOST", "MLFLOW_RUN_ID")},
           "PYTHONPATH": os.pathsep.join([str(tmp_path / "site"), *filter(None, [os.environ.get("PYTHONPATH")])])}
    compiled = subprocess.run([sys.executable, "-m", "distcomp", "compile", "--target", "kubeflow", str(spec),
                               "--nodes", "3", "--image", "i:1", "--namespace", "ml"],
                              capture_output=True, text=True, timeout=60, env=env)
    assert compiled.returncode == 0, compiled.stderr
    assert job_doc(compiled.stdout)["spec"] == {"pods": 3, "command": ["python", "run.py"]}

    statuses = [[condition("Running", "SoloRunning")], [condition("Succeeded", "SoloSucceeded", "all done")]]
    with FakeApi(statuses, job=SOLO, name="solo", leader=LEADER) as api:
        proc = subprocess.run([sys.executable, "-m", "distcomp", "submit", "--target", "kubeflow",
                               str(spec), "--nodes", "2", "--image", "i:1",
                               "--name", "solo", "--namespace", "ml", "--no-tracking", "--poll", "0.05",
                               "--kubeconfig", str(kubeconfig(tmp_path, api))],
                              capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    assert "KeyError" not in proc.stderr and "Traceback" not in proc.stderr
    method, path, body = api.requests[0]
    assert (method, path, body["kind"], body["spec"]["pods"]) == ("POST", SOLO, "SoloJob", 2)
    (listed,) = [p for m, p, _ in api.requests if p.startswith("/api/v1/namespaces/ml/pods?")]
    assert "example.org%2Fjob%3Dsolo" in listed  # the record's leader, with the job's name filled in
    assert "kubeflow:ml/SoloJob/solo: succeeded" in proc.stderr


def test_an_inline_plugin_kind_is_submitted_through_the_api() -> None:
    plugin = types.ModuleType("solokind_inline")  # the same plugin, registered in this process
    exec(compile(PLUGIN, "solokind_inline", "exec"), plugin.__dict__)
    pm = PluginManager()
    pm.load_builtins()
    pm.register_plugin(plugin, name="solo-plugin", provider="solo-dist 1.0")
    manifest = compile_job(make_plan(loads(SPEC, launchers=pm.alias_table()), gpu=False, pm=pm), {}, {}, pm=pm, image="i:1", namespace="ml")
    assert job_type_of(manifest, pm).plural == "solojobs"
    with FakeApi([[condition("Complete", "SoloDone")]], job=SOLO, name="solo", leader=LEADER) as api:
        outcome = submit_and_wait(manifest, api.client(), "ml", poll=0, sleep=lambda s: None, pm=pm)
    assert (outcome.kind, outcome.state) == ("SoloJob", "succeeded")
    assert outcome.log.endswith("boom\n")  # the leader's log, found by the record's selector
    assert [p for m, p, _ in api.requests if m == "POST"] == [SOLO]


def test_a_manifest_of_a_kind_no_plugin_provides_is_refused_before_any_request() -> None:
    from distcomp.targets.kubeflow import SubmitError

    manifest = {"apiVersion": "example.org/v1", "kind": "GhostJob", "metadata": {"name": "g"}}
    with FakeApi([[condition("Succeeded", "x")]]) as api:
        try:
            submit_and_wait(manifest, api.client(), pm=get_plugin_manager())
        except SubmitError as exc:
            assert "GhostJob of example.org/v1" in str(exc) and "PyTorchJob (kubeflow.org/v1)" in str(exc)
        else:
            raise AssertionError("a kind no plugin provides was submitted")
    assert api.requests == []


def test_a_kind_without_pod_templates_says_the_image_must_hold_the_code(tmp_path: Path) -> None:
    """distcomp cannot mount a ConfigMap into pods it does not lay out: compile says the image
    must hold the code (no ConfigMap is written), and --packages is refused by name."""
    install(tmp_path / "site")
    spec = tmp_path / "solo.yaml"
    spec.write_text(SPEC, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path / "site"),
                                                        *filter(None, [os.environ.get("PYTHONPATH")])])}
    argv = [sys.executable, "-m", "distcomp", "compile", "--target", "kubeflow", str(spec), "--image", "i:1"]
    compiled = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env)
    assert compiled.returncode == 0, compiled.stderr
    assert "code: the image's (a SoloJob has no pod templates distcomp can mount code into)" in compiled.stderr
    assert "ConfigMap" not in compiled.stdout
    packages = subprocess.run([*argv, "--packages", "numpy"], capture_output=True, text=True, timeout=60, env=env)
    assert packages.returncode == 2 and "--packages: a SoloJob has no pod templates" in packages.stderr
