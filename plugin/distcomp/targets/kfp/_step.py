"""What runs inside the KFP step's container: unpack the bundle, start the ranks with
``distcomp run``, fail the step when the job fails.

The component function carries these functions' *source*, nested in its body (``_source``),
into a module that has only kfp's and typing's names: so each one imports what it needs
itself and calls nothing else from this package. ``distcomp`` must be importable in the
image (installed there, or through ``packages_to_install``).
"""

from __future__ import annotations

from typing import Any, Optional


def step_argv(python: str, spec_file: str, run_dir: str, inputs: dict[str, Any], outputs: dict[str, Any],
              options: list[str], tracking: bool, experiment: Optional[str] = None) -> list[str]:
    """The ``distcomp run`` command for the values KFP delivered.

    ``inputs`` maps each spec input to ``(type, value)``; an optional input KFP did not
    deliver is None and gets no ``--input``, so distcomp drops its ``[ ... ]`` block: the
    if-present rule of KFP placeholders, applied with distcomp's own rendering."""
    argv = [python, "-m", "distcomp", "run", spec_file, "--run-dir", run_dir, *options]
    for name, (kind, value) in inputs.items():
        if value is None:
            continue
        if kind == "port":
            text = value.path  # the artifact's local path in the container
        elif kind == "boolean":
            text = "true" if value else "false"
        elif kind == "integer":
            text = str(int(value))  # KFP may hand a JSON number over as 5.0
        elif kind == "number":
            text = repr(float(value))
        else:
            text = str(value)
        argv += ["--input", f"{name}={text}"]
    for name, artifact in outputs.items():
        argv += ["--output", f"{name}={artifact.path}"]
    if not tracking:
        argv.append("--no-tracking")
    elif experiment:
        argv += ["--experiment", experiment]
    return argv


def run_distcomp_step(bundle: str, inputs: dict[str, Any], outputs: dict[str, Any], options: list[str]) -> None:
    """Run the job on this node's ranks; the output artifacts get the job's facts as metadata."""
    import base64
    import importlib.util
    import io
    import json
    import os
    import re
    import shlex
    import shutil
    import signal
    import subprocess
    import sys
    import tarfile
    import tempfile

    if importlib.util.find_spec("distcomp") is None:
        raise RuntimeError("distcomp is not installed in this step's image: use an image that has it (with what "
                           "the command needs, e.g. pip install 'distcomp[torch]'), or list it in "
                           "load_component(..., packages_to_install=[...])")
    work = tempfile.mkdtemp(prefix="distcomp-step-")
    with tarfile.open(fileobj=io.BytesIO(base64.b64decode(bundle)), mode="r:gz") as tar:
        if hasattr(tarfile, "data_filter"):
            tar.extractall(work, filter="data")
        else:  # Python before 3.11.4: the archive is our own, written at compile time
            tar.extractall(work)
    os.makedirs(os.path.join(work, "code"), exist_ok=True)  # an empty code folder packs to no entry
    # An ephemeral container's default SQLite store would be lost: track only where the
    # pipeline says (MLFLOW_TRACKING_URI, e.g. set with task.set_env_variable).
    tracking = bool(os.environ.get("MLFLOW_TRACKING_URI"))
    experiment = os.environ.get("MLFLOW_EXPERIMENT_NAME")  # MLflow's convention; else the component's name
    run_dir = os.path.join(work, "run")
    argv = step_argv(sys.executable, os.path.join(work, "component.yaml"), run_dir, inputs, outputs, options,
                     tracking, experiment)
    if not tracking:
        print("distcomp step: MLFLOW_TRACKING_URI is not set: running without MLflow tracking", flush=True)
    print("distcomp step: " + shlex.join(argv), flush=True)

    # The step's own working folder, as for `distcomp run` typed there: MLflow puts a SQLite
    # store's artifacts under it (./mlruns), so not the bundle's folder, which is removed.
    # Unbuffered, so that distcomp's and the ranks' lines reach the step's log as they happen.
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1, env=env)
    # Stopping the step (a cancelled run) stops the job the way distcomp stops it: every rank.
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: proc.send_signal(signum))
    run_id = None
    try:
        assert proc.stdout is not None
        for line in proc.stdout:  # the ranks' [rankN] lines and distcomp's own, into the step's log
            print(line, end="", flush=True)
            found = re.match(r"distcomp run: MLflow run ([0-9a-f]{32}) ", line)
            run_id = found.group(1) if found else run_id
        returncode = proc.wait()
    finally:
        signal.signal(signal.SIGTERM, previous)
    if returncode != 0:  # the folder stays, for its rank logs
        raise RuntimeError(f"distcomp run exited with code {returncode} (1: a rank failed, 2: bad inputs, "
                           f"124: timed out); rank logs in {run_dir}/logs")

    try:
        with open(os.path.join(run_dir, "status.json"), encoding="utf-8") as f:
            status = json.load(f)
    except (OSError, ValueError):
        status = {}
    facts = {"distcomp.processes": len(status.get("processes", [])), "distcomp.attempts": status.get("attempts", 1),
             "distcomp.wall_s": round(status.get("wall_s", 0.0), 3)}
    if run_id:
        facts["distcomp.mlflow_run_id"] = run_id
    for artifact in outputs.values():
        artifact.metadata.update(facts)
    shutil.rmtree(work, ignore_errors=True)
