"""One MLflow run per distributed job: created before the ranks start, ended with the job.

The ranks get ``MLFLOW_RUN_ID`` (and a copy, ``DISTCOMP_MLFLOW_RUN_ID``, which survives
``mlflow.start_run()`` deleting the former), ``MLFLOW_TRACKING_URI`` and
``MLFLOW_EXPERIMENT_ID``: ``distcomp.runtime`` logs into that run from rank 0, and a script
calling ``mlflow.start_run()`` resumes it instead of making one run per rank. They also get
``DISTCOMP_TRACKING_DIR`` (``RUN_DIR/tracking``): where rank 0 keeps, on disk, what a store
away for a while has not taken yet, and reports what it could not deliver in the end. Ranks on
this machine also get distcomp's MLflow hook first on their PYTHONPATH (``RANK_SITE``): every
``mlflow.start_run()`` of the script, on any rank, then lands in the job's run
(``distcomp.runtime._mlflow_hook``).

The run is named after what it is (``COMPONENT@VERSION JOB``), and an experiment distcomp
creates is marked as a model-training one, so the MLflow UI opens it on its runs, not in its
GenAI view.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shlex
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping

from ..mlstore._delivery import REPORTS_ENV
from ._ending import REPORTS_DIR, end
from ..mlstore._records import (MAX_KEY, MAX_TAG_VALUE, REDACTED, RunData, RunRef,
                                TrackingError, truncate, user)
from ..base.redact import NONE, Masker, is_secret, job_masker
from ..mlstore._store import Store, open_store
from ..mlstore._uri import DEFAULT_URI, sqlite_path, usable_uri

if TYPE_CHECKING:
    from ..core.jobs import Job
    from ..records import Topology
    from ..records import RunResult

Notify = Callable[[str], None]

# a folder holding only sitecustomize.py: first on a rank's PYTHONPATH, it shadows nothing else
RANK_SITE = Path(__file__).resolve().parent.parent / "runtime" / "_site"
# the tag the MLflow UI (3.x) reads to pick an experiment's view; its values' "model training" one
EXPERIMENT_KIND = {"mlflow.experimentKind": "custom_model_development"}


@dataclass(frozen=True)
class JobRun:
    """The run a job writes, and the store it lives in."""

    store: Store
    run: RunRef
    uri: str
    experiment: str  # its name ("" when attached to a run given by MLFLOW_RUN_ID)
    attached: bool = False
    run_dir: Path | None = None  # the job's folder, when the ranks can write it (not in a cluster's pods)
    pythonpath: str | None = None  # the ranks' PYTHONPATH, the hook first; None: ranks elsewhere, left alone
    started_ms: int = 0  # when the job began, by this machine's clock: runs made since are the job's
    masker: Masker = NONE  # the job's secrets: masked in every tag (the failure's last lines)

    def env(self) -> dict[str, str]:
        """What every rank needs to log into this run."""
        env = {"MLFLOW_TRACKING_URI": self.uri, "MLFLOW_RUN_ID": self.run.run_id,
               "DISTCOMP_MLFLOW_RUN_ID": self.run.run_id, "MLFLOW_EXPERIMENT_ID": self.run.experiment_id,
               "DISTCOMP_MLFLOW_TRACKING_URI": self.uri}  # kept when the script sets another
        if self.experiment:
            env["MLFLOW_EXPERIMENT_NAME"] = self.experiment
        if self.run_dir is not None:
            env[REPORTS_ENV] = str(self.run_dir / REPORTS_DIR)
        if self.pythonpath is not None:
            env["PYTHONPATH"] = self.pythonpath
        return env

    def finish(self, result: "RunResult | None", log_dir: Path, error: str = "",
               state: str = "failed") -> tuple[str, list[str]]:
        """Attach the logs, record the outcome and what the ranks could not deliver, end the run
        (each retried as MLflow's client retries); returns the status the store now holds (RUNNING
        when it did not accept the end) and the problems.

        ``result`` is None when the job did not run to an end (``error`` and ``state`` say why)."""
        return end(self.store, self.run, result, log_dir, error, state, self.started_ms, self.masker)


def run_name(job: "Job") -> str:
    """``COMPONENT@VERSION JOB``: what ran, and which time (the job id less the component's name,
    which the default run folder repeats)."""
    spec = job.spec
    short = job.job_id.removeprefix(f"{spec.name}-") or job.job_id
    return truncate(f"{spec.name}@{spec.version}" if spec.version else spec.name, MAX_KEY - 40) + \
        (f" {truncate(short, 32)}" if short else "")


def rank_pythonpath(job: "Job", topology: "Topology", environ: Mapping[str, str],
                    given: Mapping[str, str] | None = None) -> str:
    """The PYTHONPATH a local rank gets, with distcomp's MLflow hook in front of it (never in its
    place). The user's is the one the local target would give without tracking: ``given``
    (``--env``) over the spec's, over this process's, over the launcher's local default."""
    user = next((env["PYTHONPATH"] for env in (given or {}, job.spec.environment_variables, environ,
                                               topology.local_env) if "PYTHONPATH" in env), "")
    rest = [p for p in user.split(os.pathsep) if p and p != str(RANK_SITE)]
    return os.pathsep.join([str(RANK_SITE), *rest])


def spec_sha256(source: Path | None) -> str:
    return hashlib.sha256(source.read_bytes()).hexdigest() if source is not None and source.is_file() else ""


def job_tags(job: "Job", topology: "Topology") -> dict[str, str]:
    spec = job.spec
    tags = {
        "distcomp.component": spec.name,
        "distcomp.version": spec.version or "",
        "distcomp.launcher": topology.launcher,
        "distcomp.world_size": str(topology.world_size),
        "distcomp.nodes": str(topology.nodes),
        "distcomp.processes_per_node": str(topology.processes_per_node),
        "distcomp.spec_sha256": spec_sha256(spec.source),
        "distcomp.job_id": job.job_id,
        "distcomp.run_dir": str(job.run_dir),
        "distcomp.supervisor.pid": str(os.getpid()),  # who runs the job: `distcomp reap` tells a dead one
        "distcomp.supervisor.host": socket.gethostname(),
        "mlflow.source.name": str(spec.source or spec.name),
        "mlflow.source.type": "LOCAL",
        "mlflow.user": user(),
    }
    tags.update({f"distcomp.output.{name}": path for name, path in job.outputs.items()})
    return {truncate(k, MAX_KEY): truncate(v, MAX_TAG_VALUE) for k, v in tags.items()}


def _text(value: Any) -> str:
    if isinstance(value, (list, dict)):
        return json.dumps(value)
    return str(value)


def job_params(values: Mapping[str, Any], masker: Masker = NONE) -> dict[str, str]:
    """The inputs as MLflow params; a secret-looking name keeps its value out of MLflow, and the
    job's secrets are masked in the others (a URL that holds the password input). A value over
    MLflow's limit is cut by the store, which tags the run with it (``_params.fit``)."""
    return {truncate(name, MAX_KEY): REDACTED if is_secret(name) else masker.text(_text(value))
            for name, value in values.items() if value is not None}


def _owned(key: str) -> bool:
    """A tag that says who made the run and from what: its creator's to set, not the job's."""
    return key == "mlflow.user" or key.startswith("mlflow.source.")


def _additions(have: RunData, tags: Mapping[str, str],
               params: Mapping[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """What a job adds to a run it was given: its tags, less the creator's own (an MLflow
    Project's ``mlflow.source.type`` PROJECT stays), and only the params the run lacks (a param
    is immutable: ``-P lr=1`` logged by MLflow must not meet distcomp's ``1.0``)."""
    return ({k: v for k, v in tags.items() if not (_owned(k) and k in have.tags)},
            {k: v for k, v in params.items() if k not in have.params})


def start_run(job: "Job", topology: "Topology", environ: Mapping[str, str], cwd: Path,
              experiment: str | None = None, notify: Notify | None = None,
              local_ranks: bool = False, given: Mapping[str, str] | None = None,
              masker: Masker | None = None) -> JobRun | None:
    """Create (or, given ``MLFLOW_RUN_ID``, resume) the job's run. ``local_ranks``: the ranks
    run on this machine, so they get distcomp's MLflow hook in front of their PYTHONPATH;
    ``given``: the variables the user set for every rank (``--env``), which beat the spec's.
    ``masker``: the job's secrets (default: from its inputs and the spec's environment variables).

    Returns None, after a notice, when tracking was not asked for explicitly and MLflow is not
    installed; raises TrackingError when the store cannot be used."""
    say = notify or (lambda _m: None)
    uri = usable_uri(environ, cwd)
    db = sqlite_path(uri)
    if db is not None and not Path(db).exists():
        if importlib.util.find_spec("mlflow") is None:
            if "MLFLOW_TRACKING_URI" in environ or experiment:
                raise TrackingError("MLflow is not installed: pip install 'distcomp[mlflow]', or pass --no-tracking")
            say("MLflow tracking is off: MLflow is not installed (pip install 'distcomp[mlflow]'; "
                "--no-tracking silences this)")
            return None
        say(f"creating the MLflow database {db} (first use: a few seconds)")
    store = open_store(uri, environ, notify=lambda why: say(f"note: {why}"))
    started = int(time.time() * 1000)
    masker = masker if masker is not None else job_masker(job.spec, job.values)
    tags, params = masker.data(job_tags(job, topology)), job_params(job.values, masker)
    existing = environ.get("MLFLOW_RUN_ID", "").strip()
    if existing:  # MLflow's convention: the run to resume (an MLflow Project, a pipeline step)
        run = store.get_run(existing)
        tags, params = _additions(store.run_data(run.run_id), tags, params)
        for problem in store.log(run.run_id, tags, params):
            say(f"warning: {problem}")
        return JobRun(store, run, uri, "", attached=True, run_dir=job.run_dir,
                      pythonpath=rank_pythonpath(job, topology, environ, given) if local_ranks else None,
                      started_ms=started, masker=masker)
    name = experiment or job.spec.name
    run = store.create_run(store.experiment(name, EXPERIMENT_KIND), run_name(job), tags, params)
    return JobRun(store, run, uri, name, run_dir=job.run_dir,
                  pythonpath=rank_pythonpath(job, topology, environ, given) if local_ranks else None,
                  started_ms=started, masker=masker)


def describe(run: JobRun) -> str:
    """One line for the console: which run, where, and how to look at it."""
    how = "resumed" if run.attached else f"experiment {run.experiment!r}"
    # one shell word: a job dir with a space must still give a command that can be pasted
    view = f"; view: mlflow ui --backend-store-uri {shlex.quote(run.uri)}" if run.uri.startswith("sqlite:") else ""
    return f"MLflow run {run.run.run_id} ({how}) in {run.uri}{view}"


__all__ = ["DEFAULT_URI", "EXPERIMENT_KIND", "RANK_SITE", "JobRun", "describe", "job_params", "job_tags", "run_name",
           "start_run"]
