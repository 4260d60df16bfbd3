"""What runs inside the KFP step's container: unpack the bundle, write the job record of what
KFP delivered, and run ``python -m distcomp.worker`` on it, which starts the ranks (one node) or
submits a Kubeflow training job and waits for it (several nodes, through a shared volume);
fail the step when the job fails. The record's template, with its format, is what the compile
fixed: never CLI flags, so a pipeline compiled by one distcomp runs with another, or is refused
with what to do.

The component function carries these functions' *source*, nested in its body (``_source``),
into a module that has only kfp's and typing's names: so each one imports what it needs
itself and calls nothing else from this package. ``distcomp`` must be importable in the
image (installed there, or through ``packages_to_install``).
"""

from __future__ import annotations

from typing import Any, Optional


def input_text(kind: str, value: Any) -> str:
    """A value KFP delivered as distcomp's ``--input`` text (a port: its path in the container)."""
    if kind == "port":
        return value if isinstance(value, str) else value.path
    if kind == "boolean":
        return "true" if value else "false"
    if kind == "integer":
        return str(int(value))  # KFP may hand a JSON number over as 5.0
    if kind == "number":
        return repr(float(value))
    return str(value)


def unpack(bundle: str, folder: str) -> None:
    """The embedded spec and code folder (a base64 tar.gz written at compile time) into ``folder``."""
    import base64
    import io
    import os
    import tarfile

    with tarfile.open(fileobj=io.BytesIO(base64.b64decode(bundle)), mode="r:gz") as tar:
        if hasattr(tarfile, "data_filter"):
            tar.extractall(folder, filter="data")
        else:  # Python before 3.11.4: the archive is our own
            tar.extractall(folder)
    os.makedirs(os.path.join(folder, "code"), exist_ok=True)  # an empty code folder packs to no entry


def step_record(spec_file: str, run_dir: str, inputs: dict[str, Any], outputs: dict[str, Any],
                template: dict[str, Any], tracking: bool, experiment: Optional[str] = None) -> dict[str, Any]:
    """The job record (``distcomp.worker``) of the values KFP delivered: ``template`` is what the
    compile fixed (the record's format and the run's options), the rest comes from this run.

    ``inputs`` maps each spec input to ``(type, value)``; an optional input KFP did not
    deliver is None and is left out, so distcomp drops its ``[ ... ]`` block: the if-present
    rule of KFP placeholders, applied with distcomp's own rendering."""
    options = {**template["options"], "run_dir": run_dir, "tracking": tracking}
    if tracking and experiment:
        options["experiment"] = experiment
    return {"distcomp_job": template["distcomp_job"], "action": "run", "spec": spec_file,
            "inputs": {name: input_text(kind, value) for name, (kind, value) in inputs.items() if value is not None},
            "outputs": {name: artifact.path for name, artifact in outputs.items()}, "options": options}


def run_distcomp_step(bundle: str, inputs: dict[str, Any], outputs: dict[str, Any], template: dict[str, Any]) -> None:
    """Run the job on this node's ranks (``python -m distcomp.worker``, reading the job record
    ``template`` completes; never CLI flags, so a pipeline compiled by one distcomp runs with
    another, or is refused with what to do); the output artifacts get the job's facts as metadata."""
    import importlib.util
    import json
    import os
    import shlex
    import shutil
    import signal
    import subprocess
    import sys
    import tempfile

    if importlib.util.find_spec("distcomp") is None:
        raise RuntimeError("distcomp is not installed in this step's image: use an image that has it (with what "
                           "the command needs, e.g. pip install 'distcomp[torch]'), or list it in "
                           "load_component(..., packages_to_install=[...])")
    work = tempfile.mkdtemp(prefix="distcomp-step-")
    unpack(bundle, work)
    # An ephemeral container's default SQLite store would be lost: track only where the
    # pipeline says (MLFLOW_TRACKING_URI, e.g. set with task.set_env_variable).
    tracking = bool(os.environ.get("MLFLOW_TRACKING_URI"))
    experiment = os.environ.get("MLFLOW_EXPERIMENT_NAME")  # MLflow's convention; else the component's name
    run_dir = os.path.join(work, "run")
    record = os.path.join(work, "job.json")  # it may hold secret inputs: its owner's only
    with os.fdopen(os.open(record, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w", encoding="utf-8") as f:
        json.dump(step_record(os.path.join(work, "component.yaml"), run_dir, inputs, outputs, template, tracking,
                              experiment), f)
    argv = [sys.executable, "-m", "distcomp.worker", record]
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
    try:
        assert proc.stdout is not None
        for line in proc.stdout:  # the ranks' [rankN] lines and distcomp's own, into the step's log
            print(line, end="", flush=True)
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
    run_id = (status.get("mlflow") or {}).get("run_id")  # the job's record, never its console text
    if run_id:
        facts["distcomp.mlflow_run_id"] = run_id
    for artifact in outputs.values():
        artifact.metadata.update(facts)
    shutil.rmtree(work, ignore_errors=True)


def submit_record(spec_file: str, job: str, claim: str, mount: str, workdir: str, inputs: dict[str, Any],
                  outputs: dict[str, str], template: dict[str, Any], namespace: Optional[str], tracking: bool,
                  experiment: Optional[str], outcome_file: str) -> dict[str, Any]:
    """The submit record (``distcomp.worker``): ``template`` is what the compile fixed (format,
    target, the layout and the user's job options); ``inputs`` as for step_record (ports: their
    copies on the volume), ``outputs`` maps each output to its path on the volume."""
    options = {**template["options"], "name": job, "volumes": {claim: mount}, "workdir": workdir,
               "output_paths": outputs, "tracking": tracking}
    if namespace:  # in a pod: its namespace, and what kfp-kubernetes put on it, reach the training pods
        options.update(namespace=namespace, inherit_pod=True)
    if tracking and experiment:
        options["experiment"] = experiment
    return {"distcomp_job": template["distcomp_job"], "action": "submit", "target": template["target"],
            "spec": spec_file, "options": options, "outcome_file": outcome_file,
            "inputs": {name: input_text(kind, value) for name, (kind, value) in inputs.items() if value is not None}}


def run_distcomp_submit(bundle: str, inputs: dict[str, Any], outputs: dict[str, Any], template: dict[str, Any],
                        claim: str, mount: str, job_prefix: str, code_path: Optional[str] = None) -> None:
    """Run the job on several nodes as a Kubeflow training job, through the shared volume.

    The training pods cannot see this step's files, so the spec, its code and the input
    artifacts are copied to ``MOUNT/distcomp/JOB/`` on the claim both mount; the outputs are
    written there and copied back into the step's output artifacts when the job succeeded.
    ``code_path``: the code folder inside the image, when the code is not in the bundle."""
    import importlib.util
    import json
    import os
    import secrets
    import shlex
    import shutil
    import signal
    import subprocess
    import sys

    if importlib.util.find_spec("distcomp") is None:
        raise RuntimeError("distcomp is not installed in this step's image: use an image that has it (with what "
                           "the command needs), or list it in load_component(..., packages_to_install=[...])")
    if not os.path.isdir(mount):
        raise RuntimeError(f"the shared volume is not mounted at {mount}: mount claim {claim!r} on this task "
                           f"(kfp.kubernetes.mount_pvc(task, pvc_name={claim!r}, mount_path={mount!r}))")
    job = f"{job_prefix}-{secrets.token_hex(3)}"  # unique per run: reruns of the step never collide
    folder = os.path.join(mount, "distcomp", job)
    os.makedirs(os.path.join(folder, "outputs"))
    unpack(bundle, folder)
    delivered = {}
    for name, (kind, value) in inputs.items():
        if kind == "port" and value is not None:  # the pods see the volume, not this step's artifact
            copy = os.path.join(folder, "inputs", name)
            os.makedirs(os.path.dirname(copy), exist_ok=True)
            if os.path.isdir(value.path):
                shutil.copytree(value.path, copy)
            else:
                shutil.copy2(value.path, copy)
            value = copy
        delivered[name] = (kind, value)
    paths = {name: os.path.join(folder, "outputs", name) for name in outputs}
    # the pod's own namespace: where its service account may create jobs
    ns_file = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"
    namespace = None
    if os.path.exists(ns_file):
        with open(ns_file, encoding="utf-8") as f:
            namespace = f.read().strip() or None
    tracking = bool(os.environ.get("MLFLOW_TRACKING_URI"))
    record = os.path.join(folder, "outcome.json")  # the job's outcome as JSON (a JobOutcome), never console text
    job_file = os.path.join(folder, "job.json")  # it may hold secret inputs: its owner's only
    with os.fdopen(os.open(job_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w", encoding="utf-8") as f:
        json.dump(submit_record(os.path.join(folder, "component.yaml"), job, claim, mount,
                                code_path or os.path.join(folder, "code"), delivered, paths, template, namespace,
                                tracking, os.environ.get("MLFLOW_EXPERIMENT_NAME"), record), f)
    argv = [sys.executable, "-m", "distcomp.worker", job_file]
    print("distcomp step: " + shlex.join(argv), flush=True)

    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1, env=env)
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: proc.send_signal(signum))
    try:
        assert proc.stdout is not None
        for line in proc.stdout:  # the submit's progress, the reason and the leading pod's log
            print(line, end="", flush=True)
        returncode = proc.wait()
    finally:
        signal.signal(signal.SIGTERM, previous)
    try:
        with open(record, encoding="utf-8") as f:
            outcome = json.load(f)
    except (OSError, ValueError):  # it stopped before the job was submitted: its log above says why
        outcome = {}
    reason = " ".join(str(outcome.get(k) or "") for k in ("job_id", "state", "message")).strip()
    run_id = (outcome.get("tracking") or {}).get("run_id")
    if returncode != 0:  # the folder stays, for what the pods wrote
        raise RuntimeError(f"distcomp submit exited with code {returncode} (1: the job failed, 2: bad inputs or no "
                           f"cluster access, 124: timed out): {reason or 'see the log above'}; files in {folder}")

    facts = {"distcomp.job": job, "distcomp.outcome": reason}
    if run_id:
        facts["distcomp.mlflow_run_id"] = run_id
    for name, artifact in outputs.items():
        written = paths[name]
        if os.path.isdir(written):
            shutil.copytree(written, artifact.path, dirs_exist_ok=True)
        elif os.path.exists(written):
            os.makedirs(os.path.dirname(artifact.path) or ".", exist_ok=True)
            shutil.copy2(written, artifact.path)
        else:
            print(f"distcomp step: warning: the job wrote no output {name!r} ({written})", flush=True)
        artifact.metadata.update(facts)
    shutil.rmtree(folder, ignore_errors=True)
