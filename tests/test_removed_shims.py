"""Issue 35, first step: the shims kept for forms that never shipped are gone, and what a user
meets instead. (Each other removal is covered where its real code path is tested: the plugin
manager, the spec's launcher table, the MLflow backend, the KFP job options.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from distcomp.core.hookspec import hookimpl
from distcomp.target import Compiled, TargetType
from tests.test_bad_input import distcomp, files

REPO = Path(__file__).resolve().parents[1]
DDP = str(REPO / "examples" / "pytorch-ddp" / "component.yaml")


@pytest.mark.slow
def test_submit_without_a_target_is_refused_as_compile_is(tmp_path: Path) -> None:
    """``distcomp submit`` no longer means ``--target kubeflow`` (``DEFAULT_SUBMIT``): like
    ``compile``, it needs ``--target``, and is refused with exit 2 before anything exists."""
    for command in ("submit", "compile"):
        proc = distcomp(command, DDP, "--nodes", "2", "--image", "i:1", cwd=tmp_path)
        assert (proc.returncode, proc.stdout) == (2, ""), proc.stderr
        assert proc.stderr.splitlines()[-1] == (f"distcomp {command}: error: the following arguments are required: "
                                                "--target"), proc.stderr
        assert "Traceback" not in proc.stderr
    assert files(tmp_path) == set()  # no MLflow store, no run folder, no job record


class FirstContract:
    """A target of the first contract: ``submit(spec, options, notify)``, no ``job``."""

    def compile(self, spec, options):  # type: ignore[no-untyped-def]
        return Compiled(kind="first", text=spec.name + "\n")

    def submit(self, spec, options, notify):  # type: ignore[no-untyped-def]
        raise AssertionError("called without its JobContext")


class FirstPlugin:
    @hookimpl
    def distcomp_targets(self):  # type: ignore[no-untyped-def]
        yield TargetType(name="first", factory=FirstContract, submits=True)


def test_a_three_parameter_submit_is_no_longer_called(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 35, a fifth step: one target contract. The three-parameter ``submit(spec, options,
    notify)`` (the job's MLflow env slipped into the spec) is gone: a plain target's submit is
    called as ``submit(spec, options, notify, job)``, and one that takes three parameters fails
    as a JobError naming the target and its provider, before any job exists."""
    import distcomp as api
    from distcomp.core.plugins import get_plugin_manager
    from distcomp.errors import JobError

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    spec = tmp_path / "job.yml"
    spec.write_text("type: command\nname: first\ncommand: python -c pass\n", encoding="utf-8")
    plugin = FirstPlugin()
    get_plugin_manager().register_plugin(plugin, name="first", provider="first-dist 1.0")
    try:
        assert api.compile(api.load(spec), "first").text == "first\n"  # compile(spec, options) still works
        with pytest.raises(JobError, match=r"target 'first' from first-dist 1.0 failed to submit: TypeError"):
            api.submit(api.load(spec), "first", tracking=False)
    finally:
        get_plugin_manager().unregister(plugin)
    assert not any((tmp_path / "state" / "distcomp" / "jobs").glob("first-*"))  # its job folder removed
