"""One error hierarchy: every exception class distcomp exports is a DistcompError of one kind, usage
(exit 2) or job (exit 1); anything else escaping a command is a bug and shows its traceback."""

from __future__ import annotations

import importlib
import inspect
import json
import os
import pkgutil
import subprocess
import sys
import textwrap
from pathlib import Path

import distcomp
from distcomp.errors import DistcompError, JobError, OptionError, UsageError


# run in a pod with only the standard library (no distcomp): its errors are wrapped as UsageErrors
# by the submit side (delivery/store.py), tested in tests/targets/kubeflow/test_store.py
# The node agent (distcomp.agent) is the same kind of program: it imports nothing of distcomp, and
# its errors end in its own one-line message and exit 2 (tests/agent/test_agent.py); the writer
# side checks a record it made itself, so a RecordError there is distcomp's bug, not the user's.
STANDALONE = {"distcomp.delivery.fetcher", "distcomp.agent", "distcomp.agent._node", "distcomp.agent.record",
              "distcomp.agent.trust", "distcomp.agent.supervise"}


def exported_exceptions() -> dict[str, type[BaseException]]:
    """Every public exception class defined in a distcomp module (all modules imported); warnings
    are not errors (the registry's deprecation notice is one) and are left out."""
    found: dict[str, type[BaseException]] = {}
    for info in pkgutil.walk_packages(distcomp.__path__, "distcomp."):
        if info.name.endswith("__main__") or info.name in STANDALONE:  # importing it runs the command line
            continue
        module = importlib.import_module(info.name)
        for name, obj in vars(module).items():
            if (inspect.isclass(obj) and issubclass(obj, BaseException) and not issubclass(obj, Warning)
                    and obj.__module__ == info.name and not name.startswith("_")):
                found[f"{info.name}.{name}"] = obj
    return found


def test_every_exported_exception_is_a_usage_or_a_job_error() -> None:
    found = exported_exceptions()
    names = {cls.__name__ for cls in found.values()}
    assert {"SpecError", "InputError", "RenderError", "PluginError", "DuplicatePluginError", "RegistryError",
            "TrackingError", "CompileError", "SubmitError", "AzureMLTargetError", "KfpTargetError",
            "MlflowTargetError", "LaunchError", "StartError", "RunDirBusy", "PlaceholderError", "RankInfoError",
            "SymlinkLoop", "UnknownLauncherError", "StoreUnavailable"} <= names
    outside = sorted(path for path, cls in found.items() if not issubclass(cls, DistcompError))
    assert outside == []
    kinds = {path: (issubclass(cls, UsageError), issubclass(cls, JobError)) for path, cls in found.items()
             if cls is not DistcompError}
    assert sorted(p for p, kind in kinds.items() if kind.count(True) != 1) == []  # exactly one kind each


def test_the_kinds_and_exit_codes() -> None:
    from distcomp.core.plugins import PluginError
    from distcomp.spec import SpecError
    from distcomp.targets.kubeflow import SubmitError
    from distcomp.targets.local import LaunchError, RunDirBusy
    from distcomp.tracking import TrackingError

    assert [cls.exit_code for cls in (SpecError, PluginError, RunDirBusy, TrackingError, OptionError)] == [2] * 5
    assert [cls.exit_code for cls in (LaunchError, SubmitError)] == [1, 1]
    # the bases callers caught before stay
    assert issubclass(SpecError, ValueError) and issubclass(OptionError, ValueError)
    assert issubclass(SubmitError, RuntimeError)


def test_a_bad_option_is_an_option_error() -> None:
    from distcomp.targets.local import RunOptions

    for bad in ({"timeout": 0}, {"max_restarts": -1}, {"grace": -1.0}):
        try:
            RunOptions(Path("."), **bad)  # type: ignore[arg-type]
        except OptionError as exc:
            assert str(exc).startswith(next(iter(bad)))
        else:
            raise AssertionError(f"{bad} accepted")


def run_cli_with_a_bug(tmp_path: Path, error: str) -> subprocess.CompletedProcess[str]:
    """``distcomp run`` in a real process where preparing the job raises ``error`` (a bug put in)."""
    (tmp_path / "component.yaml").write_text(
        "name: job\ntype: DistributedComponent\nlauncher:\n  type: mpi\n  additional_arguments: python -c pass\n",
        encoding="utf-8")
    code = textwrap.dedent(f"""\
        import sys
        import distcomp.core.jobs
        from distcomp.cli import main

        def make_job(*args, **kwargs):
            raise {error}

        distcomp.core.jobs.make_job = make_job
        sys.exit(main(["run", "component.yaml", "--no-tracking", "--run-dir", "runs/x"]))
        """)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path,
                          env=dict(os.environ), timeout=60)


def test_a_bug_in_a_command_is_a_crash_with_its_traceback(tmp_path: Path) -> None:
    proc = run_cli_with_a_bug(tmp_path, "ValueError('an index went wrong')")
    assert proc.returncode == 1  # Python's own exit for an uncaught exception, not the usage error's 2
    assert "Traceback (most recent call last)" in proc.stderr
    assert proc.stderr.rstrip().endswith("ValueError: an index went wrong")
    assert not (tmp_path / "runs").exists()


def test_a_usage_error_in_the_same_place_is_still_exit_2(tmp_path: Path) -> None:
    proc = run_cli_with_a_bug(tmp_path, "distcomp.spec.InputError('input x: expected an integer, got \"a\"')")
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == 'distcomp run: input x: expected an integer, got "a"\n'
    assert not (tmp_path / "runs").exists()


def test_the_cli_own_usage_error_is_a_usage_error() -> None:
    from distcomp import cli

    assert issubclass(cli._Usage, UsageError)
    assert json.loads(json.dumps(UsageError.exit_code)) == 2
