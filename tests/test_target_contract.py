"""Issue 35: one target contract. The core makes a job's Plan once and hands it to
``Target.compile(plan, options)``; the Compiled carries it, and every target's compile shows its
warnings. A plugin written as the docs showed before ``Target`` (a plain class with
``compile(spec, options)``) is wrapped once by the plugin manager and keeps working."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any, Iterator, Mapping

import pytest

import distcomp
from distcomp.core import plan as plan_module
from distcomp.core.hookspec import hookimpl
from distcomp.core.plugins import PluginManager, SpecTarget, get_plugin_manager
from distcomp.records import JobOutcome, JobState
from distcomp.target import Compiled, JobContext, Target, TargetType

from ._dists import install as install_dist
from .targets._jobs import clean_env
from .test_plugins import example_module

PLUGIN_DIR = Path(distcomp.__file__).parent
# the distcomp_targets example exactly as the docs showed it before Target: a plain class
OLD_EXAMPLE = '''
import shlex
from distcomp.core.hookspec import hookimpl
from distcomp.core.target import Compiled, TargetOption, TargetType

class ScriptTarget:
    def compile(self, spec, options):
        argv = spec.render({}, {})
        lines = ["#!/bin/sh", f"# {spec.name}: {spec.distribution.nodes} node(s)",
                 f"exec {options['launcher_prefix']} {shlex.join(argv)}"]
        return Compiled(kind="shell script", text="\\n".join(lines) + "\\n")

@hookimpl
def distcomp_targets():
    yield TargetType(name="script", factory=ScriptTarget, description="a shell script",
                     options=(TargetOption("launcher_prefix", default="env",
                                           help="what runs the command"),))
'''
# a command that brings its own launcher and gives it `python3` as its script: the plan warns
OWN_SPEC = """\
type: command
name: own-warnings
command: >-
  torchrun --nproc-per-node=2 --standalone python3 train.py
environment_variables: {ACCELERATE_USE_CPU: 'true'}
distribution: {type: pytorch}
"""
WARNING = "warning: torchrun takes `python3` as its script"


def own_spec(folder: Path) -> Path:
    (folder / "train.py").write_text("print('hi')\n", encoding="utf-8")
    (folder / "job.yml").write_text(OWN_SPEC, encoding="utf-8")
    return folder / "job.yml"


def cli(*args: Any, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-m", "distcomp", *map(str, args)], capture_output=True, text=True,
                          timeout=120, cwd=cwd, env=clean_env(**env))
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def module_of(source: str, name: str) -> ModuleType:
    module = ModuleType(name)
    exec(compile(source, f"<{name}>", "exec"), module.__dict__)
    return module


# -- a plugin as the docs show it, and as they showed it before -----------------------------------
def test_a_plain_target_is_wrapped_once_and_a_target_subclass_is_not(tmp_path: Path) -> None:
    spec = distcomp.load(own_spec(tmp_path))
    plan = plan_module.make_plan(spec, nodes=2)
    old = PluginManager()
    old.load_builtins()
    old.register_plugin(module_of(OLD_EXAMPLE, "old_script"), name="old", provider="mypkg 0.9")
    made = old.target("script").make()
    assert isinstance(made, SpecTarget) and isinstance(made, Target) and made.target_name == "script"
    assert made.compile(plan, {"launcher_prefix": "nice"}).text == (
        "#!/bin/sh\n# own-warnings: 2 node(s)\nexec nice torchrun --nproc-per-node=2 --standalone python3 train.py\n")
    new = PluginManager()
    new.load_builtins()
    new.register_plugin(example_module("distcomp_targets"), name="new", provider="mypkg 1.0")
    target = new.target("script").make()
    assert type(target).__name__ == "ScriptTarget" and not isinstance(target, SpecTarget)  # no wrapper
    assert "# own-warnings: 2 node(s), world size 4\n" in target.compile(plan, {"launcher_prefix": "env"}).text
    # a compile-only target's job methods say so, as a UsageError naming it
    with pytest.raises(distcomp.errors.UsageError, match="target 'script' only compiles: it has no status"):
        made.status("1")


@pytest.mark.parametrize("source", [OLD_EXAMPLE, "docs"])
def test_the_docs_plugin_compiles_through_the_cli(tmp_path: Path, source: str) -> None:
    """Installed as a distribution: the example of today's docs, and the one they showed before."""
    from .test_plugins import example_code

    code = example_code(distcomp.core.hookspec.DistcompSpecs.distcomp_targets.__doc__ or "") \
        if source == "docs" else source
    install_dist(tmp_path / "site", "script-dist", "script_plugin", code, "[distcomp]\nscript = script_plugin\n")
    spec = own_spec(tmp_path)
    proc = cli("compile", spec, "--target", "script", "--launcher-prefix", "nice", "--nodes", "2", cwd=tmp_path,
               PYTHONPATH=str(tmp_path / "site"))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[0] == "#!/bin/sh"
    assert proc.stdout.splitlines()[2] == "exec nice torchrun --nproc-per-node=2 --standalone python3 train.py"
    # the plan's warning, which no plugin prints itself
    assert [line for line in proc.stderr.splitlines() if "warning:" in line] == [
        line for line in proc.stderr.splitlines() if line.startswith(f"distcomp compile: {WARNING}")], proc.stderr
    assert sum(WARNING in line for line in proc.stderr.splitlines()) == 1, proc.stderr


# -- the core makes the plan once ------------------------------------------------------------
class Recorder(Target):
    """Records what the core hands it."""

    seen: list[tuple[str, Any]] = []

    def compile(self, plan: Any, options: Mapping[str, Any]) -> Compiled:
        Recorder.seen.append(("compile", plan))
        return Compiled(kind="record", text=f"{plan.spec.name}: world size {plan.topology.world_size}\n")

    def check(self, plan: Any, options: Mapping[str, Any], compiled: Compiled) -> None:
        Recorder.seen.append(("check", plan))

    def submit(self, job: JobContext, options: Mapping[str, Any], notify: Any) -> str:
        Recorder.seen.append(("submit", job))
        return "r1"

    def status(self, job_id: str) -> JobOutcome:
        return JobOutcome(f"recorder:{job_id}", JobState.SUCCEEDED, 0)

    def logs(self, job_id: str, rank: int | None, follow: bool) -> Iterator[str]:
        yield "done\n"


class RecorderPlugin:
    @hookimpl
    def distcomp_targets(self) -> Iterator[TargetType]:
        yield TargetType(name="recorder", factory=Recorder, submits=True, job_ids="r1")


@pytest.fixture
def recorder(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[list[Any]]:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    calls: list[Any] = []
    real = plan_module.make_plan

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(plan_module, "make_plan", counted)
    pm = get_plugin_manager()
    plugin = RecorderPlugin()
    pm.register_plugin(plugin, name="recorder", provider="recorder-dist 1.0")
    Recorder.seen.clear()
    try:
        yield calls
    finally:
        pm.unregister(plugin)


def test_a_target_gets_the_one_plan_the_core_made_for_compile_check_and_submit(
        recorder: list[Any], tmp_path: Path) -> None:
    heard: list[str] = []
    handle = distcomp.submit(distcomp.load(own_spec(tmp_path)), "recorder", nodes=2, tracking=False,
                             notify=heard.append)
    assert str(handle) == "recorder:r1" and handle.status().succeeded
    assert len(recorder) == 1  # make_plan: once for the compile and the submit
    (_, compiled_plan), (_, checked_plan), (_, job) = Recorder.seen
    assert Recorder.seen[0][0] == "compile" and Recorder.seen[1][0] == "check"
    assert compiled_plan is checked_plan is job.plan is job.compiled.plan  # the same object throughout
    assert job.plan.topology.nodes == 2 and job.compiled.text == "own-warnings: world size 4\n"
    assert [m for m in heard if m.startswith("warning:")] == [f"warning: {job.plan.warnings[0]}"]
    assert WARNING.removeprefix("warning: ") in job.plan.warnings[0]


def test_a_compiled_job_carries_its_plan_and_its_submit_makes_no_other(recorder: list[Any], tmp_path: Path) -> None:
    compiled = distcomp.compile(distcomp.load(own_spec(tmp_path)), "recorder")
    assert compiled.plan is Recorder.seen[0][1] and compiled.spec is compiled.plan.spec
    assert any("python3" in w for w in compiled.plan.warnings)
    distcomp.submit(compiled, tracking=False)
    assert len(recorder) == 1 and Recorder.seen[-1][1].plan is compiled.plan


@pytest.mark.slow
def test_a_submit_stopped_by_ctrl_c_ends_its_run_killed_not_failed(recorder: list[Any], tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """As `distcomp run` interrupted before its ranks started always did: the run is KILLED."""
    import mlflow

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)

    def interrupted(self: Recorder, job: JobContext, options: Mapping[str, Any], notify: Any) -> str:
        raise KeyboardInterrupt

    monkeypatch.setattr(Recorder, "submit", interrupted)
    with pytest.raises(KeyboardInterrupt):
        distcomp.submit(distcomp.load(own_spec(tmp_path)), "recorder")
    (run,) = mlflow.MlflowClient(uri).search_runs(
        [e.experiment_id for e in mlflow.MlflowClient(uri).search_experiments()])
    assert run.info.status == "KILLED" and run.data.tags["distcomp.state"] == "cancelled"
    assert run.data.tags["distcomp.message"] == "not submitted: interrupted"


# -- every built-in target shows the plan's warnings -----------------------------------------------
@pytest.mark.parametrize("target, flags", [
    ("local", ()), ("slurm", ()), ("ray", ()), ("kubeflow", ("--image", "i:1")),
    ("azureml", ("--image", "i:1")), ("kfp", ("--image", "i:1", "--out", "c.yaml")),
    ("mlflow", ("--out", "project")),
])
def test_every_target_shows_the_plans_warnings_on_compile(tmp_path: Path, target: str, flags: tuple[str, ...]) -> None:
    proc = cli("compile", own_spec(tmp_path), "--target", target, *flags, cwd=tmp_path, HOME=str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    warnings = [line for line in proc.stderr.splitlines() if "warning:" in line]
    assert len(warnings) == 1 and warnings[0].startswith(f"distcomp compile: {WARNING}"), proc.stderr


def test_submit_dryrun_shows_the_plans_warnings_once(tmp_path: Path) -> None:
    proc = cli("submit", "--dryrun", own_spec(tmp_path), "--target", "ray", cwd=tmp_path, HOME=str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    warnings = [line for line in proc.stderr.splitlines() if "warning:" in line]
    assert len(warnings) == 1 and warnings[0].startswith(f"distcomp submit: {WARNING}"), proc.stderr


# -- no signature sniffing, no plan of a target's own ----------------------------------------------
def test_the_contract_sniffs_no_signature_and_no_target_makes_a_plan() -> None:
    for module in ("core/submission.py", "core/target.py", "core/plugins.py", "api/__init__.py"):
        tree = ast.parse((PLUGIN_DIR / module).read_text(encoding="utf-8"))
        imported = {alias.name for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))
                    for alias in node.names} | {node.module for node in ast.walk(tree)
                                                if isinstance(node, ast.ImportFrom) and node.module}
        assert "inspect" not in imported and "signature" not in imported, module
    assert not [p for p in (PLUGIN_DIR / "targets").rglob("*.py") if "make_plan" in p.read_text(encoding="utf-8")]
