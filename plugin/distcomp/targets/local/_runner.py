"""Run a ComponentSpec's Topology on this machine: prepare, supervise, restart, report."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any, Callable, Mapping

from ...records import Topology
from ...spec import ComponentSpec
from ._output import Logs
from ._prepare import prepare
from ._records import Failure, RunOptions, RunResult, describe_signal
from ._supervisor import StartError, Supervisor

Notify = Callable[[str], None]


class LaunchError(Exception):
    """A process could not be started at all (its program is missing or not executable)."""


def run_topology(spec: ComponentSpec, topology: Topology, values: Mapping[str, Any], outputs: Mapping[str, str],
                 options: RunOptions, console: Notify | None = None, notify: Notify | None = None) -> RunResult:
    """Run every attempt of the job; the result records each failure that caused a restart."""
    say = notify or (lambda _msg: None)
    run_dir = options.run_dir
    logs = Logs(run_dir / "logs", console if options.echo else None)
    supervisor = Supervisor(logs, options.grace, spec.successful_return_code == "ZeroOrGreater",
                            topology.processes_per_node)
    t0 = time.monotonic()
    deadline = t0 + options.timeout if options.timeout is not None else None
    failures: list[Failure] = []
    attempt = 0
    try:
        while True:
            launches = prepare(spec, topology, values, outputs, run_dir, options.job_id, attempt, options.max_restarts,
                               extra=options.env)
            try:
                result = supervisor.run(launches, attempt, deadline)
            except StartError as exc:  # the program is missing, not executable, or the folder is gone
                program = exc.error.filename or exc.launch.argv[0]
                raise LaunchError(f"cannot start {program!r}: {exc.error.strerror or exc.error} (command run in "
                                  f"{spec.code}; is it installed and on PATH?)") from None
            except OSError as exc:  # a log could not be written (disk full, ...); the ranks were stopped
                raise LaunchError(f"cannot write the logs in {logs.log_dir}: {exc.strerror or exc}; "
                                  "every rank was stopped") from None
            left = deadline is None or time.monotonic() < deadline
            if result.outcome == "failed" and attempt < options.max_restarts and left:
                assert result.failure is not None
                failures.append(result.failure)
                attempt += 1
                say(f"attempt {attempt} failed: {result.failure.describe()}\n"
                    f"restarting every rank (restart {attempt} of {options.max_restarts})")
                continue
            break
    except LaunchError as exc:  # still leave the final record behind, then report
        _write_status(run_dir / "status.json", RunResult("failed", run_dir, attempt + 1, time.monotonic() - t0,
                                                         failures=tuple(failures), message=str(exc)), options.record)
        raise
    finally:
        try:
            logs.close()
        except OSError:  # the disk is full: reported above, or by the job's own result
            pass
    state = result.outcome
    message = ""
    if state == "timed_out":
        message = (f"job timed out after {options.timeout:g} s (--timeout); stopped what was still running: "
                   f"{', '.join(result.still_running) or 'nothing'}")
    elif state == "interrupted":
        message = f"interrupted by {describe_signal(result.signal)}; every rank was stopped"
    final = RunResult(state, run_dir, attempt + 1, time.monotonic() - t0, result.processes, result.failure,
                      tuple(failures), result.signal, message, dict(outputs))
    _write_status(run_dir / "status.json", final, options.record)
    return final


def _write_status(path: Path, result: RunResult, extra: Mapping[str, Any]) -> None:
    """The final status record, written whole or not at all."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    try:
        tmp.write_text(json.dumps({**result.to_json(), **extra}, indent=2) + "\n", encoding="utf-8")
        tmp.replace(path)
    except OSError:  # a full disk: the console report still says what happened
        tmp.unlink(missing_ok=True)
