"""The target contract end to end: a third-party target installed as a distribution (nothing in
distcomp names it) is listed, compiled, submitted, followed and cancelled through the CLI and
the Python API; the local target through the same job commands; and ``distcomp.run`` with real
ranks and an MLflow run."""

from __future__ import annotations

import pytest
import json
import os
import shlex
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from ._dists import install as install_dist

ROOT = Path(__file__).resolve().parents[1]
DDP = ROOT / "examples" / "pytorch-ddp" / "component.yaml"
TIMEOUT = 120

PLUGIN = '''
import os
import shlex
import signal
import subprocess
import time
import uuid
from pathlib import Path

from distcomp.core.hookspec import hookimpl
from distcomp.records import JobOutcome, JobState
from distcomp.core.target import Compiled, TargetOption, TargetType


def _folder(job_id):
    return Path(os.environ["SHELLJOB_HOME"]) / job_id


def _alive(pgid):
    """Whether a process of the group still runs (a zombie does not)."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rpartition(")")[2].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


class ShellJob:
    def compile(self, spec, options):
        argv = spec.render({}, {})
        text = "#!/bin/sh\\n# " + options["greeting"] + " from " + spec.name + "\\n" + shlex.join(argv) + "\\n"
        return Compiled(kind="shell script", text=text)

    def submit(self, spec, options, notify, job):
        job_id = uuid.uuid4().hex[:10]
        folder = _folder(job_id)
        folder.mkdir(parents=True)
        (folder / "job.sh").write_text(self.compile(spec, options).text)
        q = lambda name: shlex.quote(str(folder / name))
        wrapper = (f"sleep {options['delay']}; /bin/sh {q('job.sh')} > {q('log')} 2>&1; "
                   f"echo $? > {q('exit.tmp')}; mv {q('exit.tmp')} {q('exit')}")
        proc = subprocess.Popen(["/bin/sh", "-c", wrapper], start_new_session=True, stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        (folder / "pid").write_text(str(proc.pid))
        notify(f"shelljob {job_id} started (pid {proc.pid})")
        return job_id

    def status(self, job_id):
        folder = _folder(job_id)
        name = "shelljob:" + job_id
        if not (folder / "pid").exists():
            return JobOutcome(name, JobState.UNKNOWN, message="no such job")
        if (folder / "cancelled").exists():
            return JobOutcome(name, JobState.CANCELLED, exit_code=143)
        if (folder / "exit").exists():
            code = int((folder / "exit").read_text())
            return JobOutcome(name, JobState.SUCCEEDED if code == 0 else JobState.FAILED, exit_code=code)
        return JobOutcome(name, JobState.RUNNING)

    def logs(self, job_id, rank, follow):
        folder = _folder(job_id)
        offset = 0
        while True:
            done = (folder / "exit").exists() or (folder / "cancelled").exists()
            try:
                with open(folder / "log", "rb") as f:
                    f.seek(offset)
                    data = f.read()
            except FileNotFoundError:
                data = b""
            offset += len(data)
            yield from data.decode().splitlines(keepends=True)
            if not follow or done:
                return
            time.sleep(0.1)

    def cancel(self, job_id):
        folder = _folder(job_id)
        pid = int((folder / "pid").read_text())
        if not (folder / "exit").exists():
            (folder / "cancelled").write_text("")
            try:
                os.killpg(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            deadline = time.monotonic() + 10
            while _alive(pid) and time.monotonic() < deadline:
                time.sleep(0.05)
            if _alive(pid):
                os.killpg(pid, signal.SIGKILL)
        return self.status(job_id)


@hookimpl
def distcomp_targets():
    yield TargetType(name="shelljob", factory=ShellJob, submits=True, job_ids="a job folder's name",
                     description="a /bin/sh script in the background",
                     options=(TargetOption("greeting", default="hi", help="the script's first comment"),
                              TargetOption("delay", "float", default=0.0, submit_only=True,
                                           help="seconds before the script starts")))
'''


def install(site: Path) -> None:
    install_dist(site, "shelljob-dist", "shelljob_plugin", PLUGIN, "[distcomp]\nshelljob = shelljob_plugin\n", "1.0")


def spec_file(folder: Path, name: str, code: str) -> Path:
    path = folder / f"{name}.yaml"
    path.write_text(f"name: {name}\ntype: DistributedComponent\nlauncher:\n  type: torch.distributed\n"
                    f"  process_count_per_node: 1\n  additional_arguments: python -c \"{code}\"\n", encoding="utf-8")
    return path


def environ(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("KUBERNETES_SERVICE_HOST", "MLFLOW_RUN_ID")}
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])  # `python` in scripts
    for key, value in extra.items():
        if key == "PYTHONPATH":
            value = os.pathsep.join([value, *filter(None, [os.environ.get("PYTHONPATH")])])
        env[key] = value
    return env


def distcomp(*args: Any, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "distcomp", *map(str, args)], capture_output=True, text=True,
                          timeout=TIMEOUT, env=env, cwd=cwd)


def eventually(check: Any, timeout: float = 60) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.2)


def group_alive(pgid: int) -> bool:
    """Whether a process of group ``pgid`` still runs (zombies, waiting for a reaper, do not)."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rpartition(")")[2].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


def marked(marker: str) -> list[int]:
    """The live processes whose command line holds ``marker``."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if marker.encode() in cmdline.read_bytes() and pid_alive(int(cmdline.parent.name)):
                found.append(int(cmdline.parent.name))
        except (OSError, ValueError):
            continue
    return found


def pid_alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state != "Z"


# -- a third-party target ------------------------------------------------------------------

@pytest.mark.slow
def test_an_installed_target_is_listed_compiled_submitted_followed_and_cancelled_by_the_cli(tmp_path: Path) -> None:
    install(tmp_path / "site")
    env = environ(PYTHONPATH=str(tmp_path / "site"), SHELLJOB_HOME=str(tmp_path / "jobs"))
    hello = spec_file(tmp_path, "hello", "print('hello from shelljob')")

    listed = distcomp("targets", env=env, cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    (line,) = [x for x in listed.stdout.splitlines() if x.startswith("shelljob ")]
    assert "provider: shelljob-dist 1.0" in line and "compile and submit" in line
    as_json = distcomp("targets", "--json", env=env, cwd=tmp_path)
    (record,) = [t for t in json.loads(as_json.stdout) if t["name"] == "shelljob"]
    assert record["provider"] == "shelljob-dist 1.0"
    # its own options, then the two every submitting target takes (the core's MLflow run)
    assert record["options"] == ["--greeting", "--delay", "--tracking", "--experiment"]

    helped = distcomp("compile", "--target", "shelljob", "--help", env=env, cwd=tmp_path)
    assert helped.returncode == 0, helped.stderr
    assert "--greeting" in helped.stdout and "--image" not in helped.stdout
    assert "--delay" not in helped.stdout  # submit_only
    submit_help = distcomp("submit", "--target", "shelljob", "--help", env=env, cwd=tmp_path)
    assert "--delay" in submit_help.stdout and "--image" not in submit_help.stdout

    compiled = distcomp("compile", "--target", "shelljob", hello, "--greeting", "yo", env=env, cwd=tmp_path)
    assert compiled.returncode == 0, compiled.stderr
    assert compiled.stdout.startswith("#!/bin/sh\n# yo from hello\n")
    assert shlex.join(["python", "-c", "print('hello from shelljob')"]) + "\n" in compiled.stdout
    default = distcomp("compile", "--target", "shelljob", hello, env=env, cwd=tmp_path)
    assert "# hi from hello" in default.stdout

    foreign = distcomp("compile", "--target", "shelljob", hello, "--image", "x", env=env, cwd=tmp_path)
    assert foreign.returncode == 2
    assert "--image" in foreign.stderr and "kubeflow" in foreign.stderr and "Traceback" not in foreign.stderr
    written = distcomp("compile", "--target", "shelljob", hello, "--out", tmp_path / "job.sh", env=env, cwd=tmp_path)
    assert written.returncode == 0, written.stderr
    assert (tmp_path / "job.sh").read_text().startswith("#!/bin/sh\n# hi from hello")

    submitted = distcomp("submit", "--target", "shelljob", hello, "--detach", "--delay", "0.2", env=env, cwd=tmp_path)
    assert submitted.returncode == 0, submitted.stderr
    job = submitted.stdout.strip()
    assert job.startswith("shelljob:") and len(job.splitlines()) == 1
    assert "started" in submitted.stderr

    def status() -> str:
        return distcomp("status", job, env=env, cwd=tmp_path).stdout

    assert eventually(lambda: "succeeded" in status()), status()
    assert status().startswith(f"{job}: succeeded")
    shown = distcomp("status", job, "--json", env=env, cwd=tmp_path)
    outcome = json.loads(shown.stdout)
    assert (outcome["job_id"], outcome["state"], outcome["exit_code"]) == (job, "succeeded", 0)
    logs = distcomp("logs", job, env=env, cwd=tmp_path)
    assert logs.returncode == 0, logs.stderr
    assert logs.stdout == "hello from shelljob\n"

    marker = f"sleeper-{uuid.uuid4().hex}"
    sleeper = spec_file(tmp_path, "sleeper", f"import time; print('sleeping', flush=True); time.sleep(60); print('{marker}')")
    started = distcomp("submit", "--target", "shelljob", sleeper, "--detach", env=env, cwd=tmp_path)
    assert started.returncode == 0, started.stderr
    long_job = started.stdout.strip()
    pid = int((tmp_path / "jobs" / long_job.partition(":")[2] / "pid").read_text())
    assert eventually(lambda: "sleeping" in distcomp("logs", long_job, env=env, cwd=tmp_path).stdout)
    assert distcomp("status", long_job, env=env, cwd=tmp_path).stdout.startswith(f"{long_job}: running")
    assert len(marked(marker)) == 1
    cancelled = distcomp("cancel", long_job, env=env, cwd=tmp_path)
    assert cancelled.returncode == 0, cancelled.stderr
    assert cancelled.stdout.startswith(f"{long_job}: cancelled")
    assert distcomp("status", long_job, env=env, cwd=tmp_path).stdout.startswith(f"{long_job}: cancelled")
    assert not group_alive(pid) and marked(marker) == []  # the script and its python are gone
    followed = distcomp("logs", long_job, "--follow", env=env, cwd=tmp_path)  # ends: the job has ended
    assert followed.stdout == "sleeping\n"

    unknown = distcomp("status", "nosuchtarget:abc", env=env, cwd=tmp_path)
    assert unknown.returncode == 2 and "shelljob" in unknown.stderr  # the known targets are named


API_SCRIPT = '''
import sys
import distcomp
from distcomp.errors import UsageError
from distcomp.records import JobState

spec = distcomp.load(sys.argv[1])
compiled = distcomp.compile(spec, "shelljob", greeting="yo")
assert compiled.kind == "shell script", compiled.kind
assert compiled.text.startswith("#!/bin/sh\\n# yo from hello\\n"), compiled.text
try:
    distcomp.compile(spec, "shelljob", image="x")
except UsageError as exc:
    assert "'image'" in str(exc) and "greeting" in str(exc) and "shelljob" in str(exc), str(exc)
    assert "delay" not in str(exc), str(exc)  # not an option to compile
else:
    raise AssertionError("image= was taken")
try:
    distcomp.submit(spec, "shelljob", delay="soon")
except UsageError as exc:
    assert "delay" in str(exc) and "float" in str(exc), str(exc)
else:
    raise AssertionError("delay='soon' was taken")

handle = distcomp.submit(distcomp.load(sys.argv[1]), "shelljob", delay=0.1)
assert str(handle).startswith("shelljob:"), handle
outcome = handle.wait(timeout=60, poll=0.1)
assert outcome.state == JobState.SUCCEEDED and outcome.exit_code == 0, outcome
assert outcome.job_id == str(handle)
assert list(handle.logs()) == ["hello from shelljob\\n"]
again = distcomp.job(str(handle))  # a handle from the id alone, as another process has it
assert again.status().succeeded and again.status().job_id == str(handle)

# a Compiled is submitted with what it was compiled with; only submit-only options may be added
for call, said in ((lambda: distcomp.submit(compiled, greeting="hey"), "'greeting' changes what is compiled"),
                   (lambda: distcomp.submit(compiled, "local"), "compiled for target 'shelljob', not 'local'"),
                   (lambda: distcomp.submit(compiled, nodes=2), "give nodes and nproc_per_node to distcomp.compile")):
    try:
        call()
    except UsageError as exc:
        assert said in str(exc), str(exc)
    else:
        raise AssertionError(said)
yo = distcomp.submit(compiled, delay=0.1)  # a plain target object: it submits from spec and options
assert yo.wait(timeout=60, poll=0.1).succeeded

long = distcomp.submit(sys.argv[2], "shelljob")
assert long.status().state == JobState.RUNNING, long.status()
assert long.wait(timeout=0.3, poll=0.1).state == JobState.RUNNING  # timeout: its outcome so far
assert distcomp.job(str(long)).cancel().state == JobState.CANCELLED
assert long.status().state == JobState.CANCELLED
print("api ok")
'''


@pytest.mark.slow
def test_an_installed_target_is_used_through_the_python_api(tmp_path: Path) -> None:
    install(tmp_path / "site")
    env = environ(PYTHONPATH=str(tmp_path / "site"), SHELLJOB_HOME=str(tmp_path / "jobs"))
    hello = spec_file(tmp_path, "hello", "print('hello from shelljob')")
    sleeper = spec_file(tmp_path, "sleeper", "import time; time.sleep(60)")
    (tmp_path / "api.py").write_text(API_SCRIPT, encoding="utf-8")
    proc = subprocess.run([sys.executable, str(tmp_path / "api.py"), str(hello), str(sleeper)], capture_output=True,
                          text=True, timeout=TIMEOUT, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip() == "api ok"
    jobs = sorted((tmp_path / "jobs").iterdir())
    assert len(jobs) == 3
    assert sorted((folder / "job.sh").read_text().splitlines()[1] for folder in jobs) == [
        "# hi from hello", "# hi from sleeper", "# yo from hello"]  # the Compiled's options went with it
    for folder in jobs:
        assert not group_alive(int((folder / "pid").read_text()))


# -- the local target through the same commands --------------------------------------------

SUBMIT_SCRIPT = """
import json
import sys
import distcomp

print(distcomp.submit(sys.argv[1], "local", **json.loads(sys.argv[2])))
"""


def submit_local(tmp_path: Path, env: dict[str, str], spec: Path, **options: Any) -> str:
    """``distcomp submit --target local SPEC --detach`` through the API: the CLI cannot parse
    ``--target local`` (its --output/-o clashes with compile's --out/-o; see
    test_the_cli_takes_the_local_targets_flags)."""
    script = tmp_path / "submit_local.py"
    script.write_text(SUBMIT_SCRIPT, encoding="utf-8")
    proc = subprocess.run([sys.executable, str(script), str(spec), json.dumps(options)], capture_output=True,
                          text=True, timeout=TIMEOUT, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


@pytest.mark.slow
def test_the_local_target_through_submit_logs_status_and_cancel(tmp_path: Path) -> None:
    env = environ()
    run_dir = tmp_path / "ddp"
    submitted = submit_local(tmp_path, env, DDP, run_dir=str(run_dir), tracking=False,
                             inputs={"epochs": "1", "samples": "256"}, nproc_per_node=2)
    assert submitted == f"local:{run_dir}"

    followed = distcomp("logs", f"local:{run_dir}", "--follow", env=env, cwd=tmp_path)
    assert followed.returncode == 0, followed.stderr
    lines = followed.stdout.splitlines()
    assert any(x.startswith("[rank0] ") for x in lines) and any(x.startswith("[rank1] ") for x in lines), lines
    assert "[rank0] epoch 1/1 loss" in followed.stdout
    shown = distcomp("status", run_dir, "--json", env=env, cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    outcome = json.loads(shown.stdout)
    assert (outcome["state"], outcome["exit_code"]) == ("succeeded", 0), outcome
    assert outcome["job_id"] == f"local:{run_dir}" and outcome["tracking"] is None
    assert (run_dir / "outputs" / "model" / "model.pt").is_file()
    rank1 = distcomp("logs", f"local:{run_dir}", "--rank", "1", env=env, cwd=tmp_path)
    assert rank1.returncode == 0 and rank1.stdout and "[rank" not in rank1.stdout

    (tmp_path / "code").mkdir()  # a run folder is never inside the spec's code folder
    marker = f"sleeper-{uuid.uuid4().hex}"
    sleeper = spec_file(tmp_path / "code", "sleeper",
                        f"import time; print('sleeping', flush=True); time.sleep(60); print('{marker}')")
    long_dir = tmp_path / "sleeper-run"
    job = submit_local(tmp_path, env, sleeper, run_dir=str(long_dir), tracking=False, grace=2.0)
    assert job == f"local:{long_dir}"
    assert eventually(lambda: "sleeping" in distcomp("logs", job, env=env, cwd=tmp_path).stdout)
    record = json.loads((long_dir / "status.json").read_text())
    assert record["state"] == "running"
    supervisor = int(record["supervisor"]["pid"])
    assert pid_alive(supervisor)
    assert len(marked(marker)) == 1  # its rank
    cancelled = distcomp("cancel", job, env=env, cwd=tmp_path)
    assert cancelled.returncode == 0, cancelled.stderr
    assert cancelled.stdout.startswith(f"{job}: cancelled"), cancelled.stdout
    outcome = json.loads(distcomp("status", job, "--json", env=env, cwd=tmp_path).stdout)
    assert outcome["state"] == "cancelled", outcome
    assert eventually(lambda: not pid_alive(supervisor), 10), "the job's distcomp run is still there"
    assert not group_alive(supervisor)
    assert marked(marker) == []  # nor its rank


# -- distcomp.run with real ranks and MLflow -----------------------------------------------

RUN_SCRIPT = '''
import json
import sys
import distcomp

outcome = distcomp.run(sys.argv[1], inputs={"epochs": 2, "samples": 256}, nproc_per_node=2, run_dir=sys.argv[2])
print(json.dumps(outcome.to_json()))
'''


@pytest.mark.slow
def test_run_from_python_trains_on_two_ranks_and_tracks_the_job_in_mlflow(tmp_path: Path) -> None:
    import mlflow

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    (tmp_path / "run.py").write_text(RUN_SCRIPT, encoding="utf-8")
    proc = subprocess.run([sys.executable, str(tmp_path / "run.py"), str(DDP), str(tmp_path / "run")],
                          capture_output=True, text=True, timeout=TIMEOUT, env=environ(MLFLOW_TRACKING_URI=uri),
                          cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    outcome = json.loads(proc.stdout.strip().splitlines()[-1])
    assert (outcome["state"], outcome["exit_code"]) == ("succeeded", 0), outcome
    assert outcome["tracking"] and outcome["tracking"]["run_id"], outcome
    assert outcome["tracking"]["tracking_uri"] == uri

    client = mlflow.MlflowClient(tracking_uri=uri)
    run = client.get_run(outcome["tracking"]["run_id"])
    assert run.info.status == "FINISHED"
    assert {"loss", "epoch_seconds"} <= set(run.data.metrics), run.data.metrics
    assert [m.step for m in client.get_metric_history(run.info.run_id, "loss")] == [0, 1]
    assert run.data.params.get("world_size") == "2", run.data.params
    assert json.loads((tmp_path / "run" / "outputs" / "model" / "metrics.json").read_text())["world_size"] == 2


@pytest.mark.slow
def test_the_cli_takes_the_local_targets_flags(tmp_path: Path) -> None:
    """BUG (not committed): ``distcomp compile|submit --target local`` die in argparse: the local
    target's --output/-o clashes with compile's own --out/-o, and add_parsers gives the compile
    parser the named target's flags even when the command is submit."""
    env = environ()
    compiled = distcomp("compile", "--target", "local", DDP, "-i", "epochs=1", env=env, cwd=tmp_path)
    assert "Traceback" not in compiled.stderr, compiled.stderr
    assert compiled.returncode == 0, compiled.stderr
    assert "world_size: 2" in compiled.stdout
    run_dir = tmp_path / "ddp"
    submitted = distcomp("submit", "--target", "local", DDP, "--detach", "--run-dir", run_dir, "--no-tracking",
                         "-i", "epochs=1", "-i", "samples=256", "--nproc-per-node", "2", env=env, cwd=tmp_path)
    assert "Traceback" not in submitted.stderr, submitted.stderr
    assert submitted.returncode == 0, submitted.stderr
    assert submitted.stdout.strip() == f"local:{run_dir}"
    followed = distcomp("logs", f"local:{run_dir}", "--follow", env=env, cwd=tmp_path)
    assert "[rank0] " in followed.stdout and "[rank1] " in followed.stdout
    outcome = json.loads(distcomp("status", run_dir, "--json", env=env, cwd=tmp_path).stdout)
    assert (outcome["state"], outcome["exit_code"]) == ("succeeded", 0), outcome
