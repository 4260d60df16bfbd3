"""Issue 36 on Kubeflow: ``--max-restarts K`` becomes each replica's ``restartPolicy`` and the
job's ``runPolicy.backoffLimit`` (torchrun's ``elasticPolicy.maxRestarts`` for an elastic job),
the checkpoint lives on the first ``--volume`` (``DISTCOMP_CHECKPOINT_DIR`` in every pod), and
every manifest stays valid against the real CRDs. Then, under the emulated operator and kubelet
(``_operator.run_pods`` restarting pods as training-operator v1.9 does), a pod whose ranks fail
once after saving a checkpoint restarts, counts its attempt, and resumes from the checkpoint."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import distcomp

from ._kubelet import prepare
from ._operator import LOCALHOST, free_ports, pytorchjob_pods, run_pods
from .test_lifecycle import compiled, replica_specs
from .test_manifests import JOBS, validate

VOLUME = {"ckpt": "/ckpt"}


def env_of(manifest: dict[str, Any]) -> list[dict[str, str]]:
    """The env of every replica's main container."""
    return [{e["name"]: e.get("value", "") for e in r["template"]["spec"]["containers"][0].get("env", [])}
            for r in replica_specs(manifest).values()]


@pytest.mark.parametrize("job, pods", [("torch", 2), ("deepspeed", 2), ("mpi", 3), ("tensorflow", 2)])
def test_max_restarts_sets_the_restart_policy_and_backoff_of_every_kind(job: str, pods: int) -> None:
    manifest = compiled(job, nodes=2, nproc_per_node=1, max_restarts=2, volumes=VOLUME)  # CRD-valid, nothing pruned
    assert {r["restartPolicy"] for r in replica_specs(manifest).values()} == {"OnFailure"}
    # the operator fails the job once its pods' restarts add up to the limit: room for 2 of every pod
    assert manifest["spec"]["runPolicy"]["backoffLimit"] == 2 * pods + 1
    name = manifest["metadata"]["name"]
    for env in env_of(manifest):
        assert env["DISTCOMP_CHECKPOINT_DIR"] == f"/ckpt/distcomp/{name}/checkpoint"
        assert (env["DISTCOMP_MAX_RESTARTS"], env["DISTCOMP_RESTART_COUNT"]) == ("2", "0")
    for replica in replica_specs(manifest).values():  # each pod counts its own starts on the volume
        command = replica["template"]["spec"]["containers"][0]["command"]
        assert command[:2] == ["/bin/sh", "-c"] and f"/ckpt/distcomp/{name}/starts" in command[2]
    if job == "mpi":  # the launcher's mpirun forwards the count to the ranks it starts over ssh
        launcher = replica_specs(manifest)["Launcher"]["template"]["spec"]["containers"][0]["command"]
        assert launcher[launcher.index("DISTCOMP_RESTART_COUNT") - 1] == "-x"
    plain = compiled(job, nodes=2, nproc_per_node=1, volumes=VOLUME)  # no restarts: as before, nothing added
    assert {r["restartPolicy"] for r in replica_specs(plain).values()} == {"Never"}
    assert "backoffLimit" not in plain["spec"]["runPolicy"]
    assert not any(k.startswith("DISTCOMP_") and k != "DISTCOMP_TEST_MARK" for env in env_of(plain) for k in env)


def test_the_spec_gives_max_restarts_and_the_flag_overrides_it(tmp_path: Path) -> None:
    text = (JOBS / "torch" / "component.yaml").read_text()
    assert "\nlauncher:\n" in text
    (tmp_path / "component.yaml").write_text(text.replace("\nlauncher:\n", "\nlauncher:\n  max_restarts: 3\n"))
    (tmp_path / "rank.py").write_text("")
    spec = tmp_path / "component.yaml"
    assert compiled(spec, volumes=VOLUME)["spec"]["runPolicy"]["backoffLimit"] == 3 * 1 + 1
    assert "backoffLimit" not in compiled(spec, volumes=VOLUME, max_restarts=0)["spec"]["runPolicy"]


def test_an_exit_code_policy_and_an_elastic_job_take_the_restarts_their_way() -> None:
    manifest = compiled("torch", nodes=2, max_restarts=1, restart_policy="ExitCode", volumes=VOLUME)
    assert {r["restartPolicy"] for r in replica_specs(manifest).values()} == {"ExitCode"}
    assert manifest["spec"]["runPolicy"]["backoffLimit"] == 3
    given = compiled("torch", nodes=2, max_restarts=1, backoff_limit=7)  # the operator's knob, as given
    assert given["spec"]["runPolicy"]["backoffLimit"] == 7
    # elastic: torchrun restarts every rank on every node (its count is TORCHELASTIC_RESTART_COUNT)
    elastic = compiled("torch", elastic="1:3", max_restarts=4, volumes=VOLUME)
    assert elastic["spec"]["elasticPolicy"]["maxRestarts"] == 4
    assert {r["restartPolicy"] for r in replica_specs(elastic).values()} == {"Never"}
    assert "backoffLimit" not in elastic["spec"]["runPolicy"]
    (env,) = env_of(elastic)
    assert "DISTCOMP_RESTART_COUNT" not in env and env["DISTCOMP_CHECKPOINT_DIR"].endswith("/checkpoint")
    worker = replica_specs(elastic)["Worker"]["template"]["spec"]["containers"][0]["command"]
    assert worker[:2] == ["torchrun", "--no-python"]


PLAIN = """\
$schema: https://azuremlschemas.azureedge.net/latest/commandJob.schema.json
command: python resume.py /ckpt/plain-out
environment: {image: "python:3.11-slim"}
"""


@pytest.mark.slow
def test_the_one_pod_job_without_a_launcher_restarts_and_resumes(tmp_path: Path) -> None:
    """A step without a launcher is the agent-based job's plainest form: one Master pod running
    the command itself; it takes the same restarts, and RANK is the operator's (0)."""
    code = tmp_path / "code"
    code.mkdir()
    (code / "job.yml").write_text(PLAIN)
    (code / "resume.py").write_text(RESUME)
    manifest = distcomp.compile(str(code / "job.yml"), "kubeflow", code="image", volumes=VOLUME, max_restarts=1).data
    validate(manifest)
    assert replica_specs(manifest)["Master"]["restartPolicy"] == "OnFailure"
    assert manifest["spec"]["runPolicy"]["backoffLimit"] == 2
    done = _run(manifest, code, tmp_path)
    assert set(done.codes.values()) == {0} and sum(done.restarts.values()) == 1, done.explain()
    (rec,) = [json.loads(p.read_text()) for p in (tmp_path / "cluster" / "pvc" / "ckpt" / "plain-out").glob("*.json")]
    assert (rec["attempt"], rec["resumed_from"], rec["steps"]) == (1, 3, [4, 5, 6]), rec


@pytest.mark.parametrize("options, message", [
    ({"max_restarts": 1, "restart_policy": "Never"}, r"--max-restarts 1 starts the failed job again, "
                                                     r"--restart-policy Never never restarts a pod"),
    ({"max_restarts": 2, "backoff_limit": 0}, r"--backoff-limit 0 fails it at its first pod restart"),
    ({"max_restarts": 1, "trainer_v2": True}, r"--max-restarts: a TrainJob leaves this to its runtime .*"
                                              r"give --max-restarts 0"),
])
def test_contradictions_are_clear_errors(options: dict[str, Any], message: str) -> None:
    with pytest.raises(distcomp.errors.UsageError, match=message):
        compiled("torch", **options)


def test_the_compile_says_where_the_checkpoint_is_or_warns_without_a_volume() -> None:
    spec = str(JOBS / "torch" / "component.yaml")
    with_volume = distcomp.compile(spec, "kubeflow", image="i:1", max_restarts=1, volumes=VOLUME)
    name = with_volume.data["metadata"]["name"]
    assert f"checkpoint: pvc ckpt:/ckpt/distcomp/{name}/checkpoint (DISTCOMP_CHECKPOINT_DIR in every pod), kept " \
           "across restarts" in with_volume.notes
    without = distcomp.compile(spec, "kubeflow", image="i:1", max_restarts=1, scratch=["result"])
    (warning,) = [n for n in without.notes if n.startswith("warning:")]
    assert "no --volume: a restarted pod finds no checkpoint" in warning
    assert "DISTCOMP_CHECKPOINT_DIR" not in json.dumps(without.data)
    validate(without.data)


def test_the_cli_takes_max_restarts(tmp_path: Path) -> None:
    out = tmp_path / "job.yaml"
    proc = subprocess.run([sys.executable, "-m", "distcomp", "compile", "--target", "kubeflow",
                           str(JOBS / "torch" / "component.yaml"), "--image", "i:1", "--nodes", "2",
                           "--max-restarts", "1", "--volume", "ckpt:/ckpt", "--out", str(out)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "checkpoint: pvc ckpt:" in proc.stderr + proc.stdout
    bad = subprocess.run([sys.executable, "-m", "distcomp", "compile", "--target", "kubeflow",
                          str(JOBS / "torch" / "component.yaml"), "--image", "i:1", "--max-restarts", "1",
                          "--restart-policy", "Never", "--volume", "ckpt:/ckpt"], capture_output=True, text=True,
                         timeout=120)
    assert bad.returncode == 2 and "--restart-policy Never never restarts a pod" in bad.stderr
    assert "Traceback" not in bad.stderr


# --- a pod that fails once restarts and resumes, under the emulated operator ------------------

RESUME = """\
import json, os, sys, time
from pathlib import Path
from distcomp import runtime

rank, world, out = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), Path(sys.argv[1])
attempt, ckpt = runtime.restart_count(), runtime.checkpoint_dir()


def saved(r):
    try:
        return json.loads((ckpt / f"state{r}.json").read_text())["step"]
    except (OSError, ValueError):
        return 0


start = saved(rank)  # each rank its shard
steps = list(range(start + 1, 7))
for step in steps:
    (ckpt / f"state{rank}.tmp").write_text(json.dumps({"step": step}))
    os.replace(ckpt / f"state{rank}.tmp", ckpt / f"state{rank}.json")
    if attempt == 0 and step == 3:  # every rank has saved step 3 when the job fails
        deadline = time.time() + 60
        while min(saved(r) for r in range(world)) < 3 and time.time() < deadline:
            time.sleep(0.05)
        print(f"rank {rank}: failing at step 3 on attempt {attempt}", flush=True)
        sys.exit(1)
out.mkdir(parents=True, exist_ok=True)
(out / f"rank{rank}.json").write_text(json.dumps({"attempt": attempt, "resumed_from": start, "steps": steps,
                                                  "checkpoint": str(ckpt), "pod": os.environ["HOSTNAME"]}))
"""

SPEC = """\
name: resume-job
type: DistributedComponent
outputs:
  out: {type: AnyDirectory}
launcher:
  type: torch.distributed
  process_count_per_node: 2
  additional_arguments: python resume.py {outputs.out}
"""


def _job(tmp_path: Path, **options: Any) -> tuple[dict[str, Any], Path]:
    code = tmp_path / "code"
    code.mkdir()
    (code / "component.yaml").write_text(SPEC)
    (code / "resume.py").write_text(RESUME)
    manifest = distcomp.compile(str(code / "component.yaml"), "kubeflow", image="test:1", code="image",
                                volumes=VOLUME, **options).data
    validate(manifest)
    return manifest, code


def _run(manifest: dict[str, Any], code: Path, tmp_path: Path) -> Any:
    port = free_ports(1)[0]
    pods = [p.with_env(MASTER_ADDR=LOCALHOST, MASTER_PORT=str(port)) for p in pytorchjob_pods(manifest)]
    _inits, mains = prepare(manifest, pods, tmp_path / "cluster", {}, {})
    policies = {t: r["restartPolicy"] for t, r in replica_specs(manifest).items()}
    return run_pods(mains, code, tmp_path / "logs", timeout=150, restart_policy=policies,
                    backoff_limit=manifest["spec"]["runPolicy"].get("backoffLimit"))


@pytest.mark.slow
def test_a_pod_that_fails_once_restarts_and_resumes_from_its_checkpoint(tmp_path: Path) -> None:
    manifest, code = _job(tmp_path, max_restarts=1)
    name = manifest["metadata"]["name"]
    done = _run(manifest, code, tmp_path)
    assert set(done.codes.values()) == {0}, done.explain()
    assert done.restarts == {f"{name}-master-0": 1} and not done.failed, done.explain()
    assert ": failing at step 3 on attempt 0" in done.pods[0].output, done.explain()
    pvc = tmp_path / "cluster" / "pvc" / "ckpt" / "distcomp" / name
    records = {int(p.stem[4:]): json.loads(p.read_text()) for p in (pvc / "outputs" / "out").glob("rank*.json")}
    assert sorted(records) == [0, 1], done.explain()
    for rec in records.values():
        # the second attempt knows it is one, and starts after the last step the first one saved
        assert (rec["attempt"], rec["resumed_from"], rec["steps"]) == (1, 3, [4, 5, 6]), rec
        assert rec["checkpoint"] == str(pvc / "checkpoint")
    for rank in (0, 1):
        assert json.loads((pvc / "checkpoint" / f"state{rank}.json").read_text()) == {"step": 6}


@pytest.mark.slow
def test_without_restarts_the_failure_fails_the_job(tmp_path: Path) -> None:
    manifest, code = _job(tmp_path, max_restarts=0)
    done = _run(manifest, code, tmp_path)
    assert set(done.codes.values()) == {1} and done.restarts == {p.pod.name: 0 for p in done.pods}, done.explain()
    assert not list((tmp_path / "cluster").rglob("rank*.json"))


@pytest.mark.slow
def test_the_backoff_limit_ends_a_job_that_keeps_failing(tmp_path: Path) -> None:
    """A pod failing on every attempt: the operator fails the job at the limit K x pods + 1."""
    manifest, code = _job(tmp_path, max_restarts=1)
    (code / "resume.py").write_text("import sys\nprint('always failing', flush=True)\nsys.exit(1)\n")
    done = _run(manifest, code, tmp_path)
    assert "backoff limit 2 reached" in done.failed, done.explain()
    assert done.pods[0].output.count("always failing") >= 2 * 2  # both ranks, on each of 2 attempts
