"""The ray target on the target contract: a job is a Ray Jobs API submission whose driver
(``_driver``) runs the core's node agent on each node of a STRICT_SPREAD placement group; its
id is the submission id (the core's job name). Status, logs and cancel ask the Jobs API; the
ranks' lines and the job's root cause are in the job's log (``_joblog``). The job's MLflow run is
the core's: made before the submit, its env in the node record (every rank's), ended by the job
handle when it sees the end."""

from __future__ import annotations

import copy
import os
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Mapping

from ...errors import JobError, UsageError
from ...records import JobOutcome, JobState
from ...core.target import Compiled, Notify, Target
from . import _client, _http, _ids, _joblog

if TYPE_CHECKING:
    from ...records import Plan
    from ...spec import ComponentSpec
    from ...core.target import JobContext

PREFIX = "ray:"
CANCEL_WAIT = 60.0
POLL = 0.25  # seconds between status requests while waiting: one small HTTP GET to the dashboard
LOST_EVERY = 20  # while waiting, every 20th poll (5 s) also asks whether the driver's node lives
_STATES = {"PENDING": JobState.PENDING, "RUNNING": JobState.RUNNING, "SUCCEEDED": JobState.SUCCEEDED,
           "FAILED": JobState.FAILED, "STOPPED": JobState.CANCELLED}


class RayTarget(Target):
    def has_gpu(self, spec: "ComponentSpec", options: Mapping[str, Any]) -> bool | None:
        """Whether each node's bundle asks for a GPU (``--resources``, the spec's)."""
        from ._bundles import bundle

        return bool(bundle(spec, options).get("GPU"))

    def compile(self, plan: "Plan", options: Mapping[str, Any]) -> Compiled:
        """What will be submitted (nothing is): the entrypoint, runtime_env, bundles, record."""
        from ._compile import compile_job

        return compile_job(plan, options)

    def check(self, plan: "Plan", options: Mapping[str, Any], compiled: Compiled) -> None:
        """The cluster answers and runs a Ray new enough, before anything of the job exists."""
        _client.check(_client.address_of(options))

    def tracking_uri(self, options: Mapping[str, Any], notify: Notify) -> str:
        """$MLFLOW_TRACKING_URI (a relative SQLite path made absolute), else ./mlflow.db, absolute:
        the nodes reach it only where they share this machine's files; an http:// server otherwise."""
        uri = os.environ.get("MLFLOW_TRACKING_URI", "").strip() or "sqlite:///mlflow.db"
        if uri.startswith("sqlite:///") and not uri.startswith("sqlite:////"):
            uri = "sqlite:///" + os.path.abspath(uri[len("sqlite:///"):])
        if uri.startswith(("sqlite:", "file:")) or "://" not in uri:
            notify(f"MLflow store {uri}: the ranks reach it only on nodes that share this machine's files; give "
                   "MLFLOW_TRACKING_URI=http://... (an MLflow server the nodes reach) otherwise")
        return uri

    def submit(self, job: "JobContext", options: Mapping[str, Any], notify: Notify) -> str:
        """Upload the code and the driver package, submit the compiled job (``job.compiled``) with
        the job's name as its submission id and its MLflow run env in the node record."""
        from ...core.agentjob import record_env
        from ._stage import stage

        spec, compiled = job.plan.spec, job.compiled
        if compiled.native is not None and tuple(compiled.native.needles) != tuple(job.masker.needles):
            raise JobError(f"{compiled.kind}: compiled with other secrets than the job has; compile it again")
        address = _client.address_of(options)
        client = _client.client(address)
        data = copy.deepcopy(compiled.data)
        record = data["node_record"]
        record["job"] = job.name
        record["env"].update(record_env(dict(job.env), job.masker))
        config = {"job": job.name, "bundles": data["placement_group"]["bundles"],
                  "wait": data["placement_group"]["wait_s"], "outputs": data["outputs"], "record": record,
                  "max_restarts": int(data.get("max_restarts") or 0),
                  "checkpoint_dir": str(data.get("checkpoint_dir") or ""),
                  "progress_dir": str(_ids.progress_folder(address, job.name))}
        runtime_env = dict(data["runtime_env"])
        with tempfile.TemporaryDirectory(prefix="distcomp-ray-") as tmp:
            runtime_env["py_modules"] = [str(stage(Path(tmp), config, job.masker))]
            metadata = {"distcomp_component": spec.ref, "mlflow_run_id": job.tracking.run_id if job.tracking else "",
                        "distcomp_world_size": str(job.plan.topology.world_size)}
            job_id = _client.submit(client, address, entrypoint=data["entrypoint"], submission_id=job.name,
                                    runtime_env=runtime_env, metadata=metadata)
        _ids.remember(job_id, address, metadata)
        notify(f"submitted Ray job {job_id} ({spec.ref}) to {address}")
        return str(job_id)

    # -- a submitted job -------------------------------------------------------------------
    def place(self, job_id: str) -> str:
        """The Jobs API's address: a Ray job id names one job only at one cluster."""
        return _ids.job_address(job_id.removeprefix(PREFIX))

    def _client(self, job_id: str) -> tuple[Any, str, str]:
        """The client of the cluster the job went to, once it is sure the job there is the one
        submitted (never another job that took its id): the Jobs API over urllib (``_http``),
        no ray import in status, logs and cancel."""
        job_id = job_id.removeprefix(PREFIX)
        address = _ids.job_address(job_id)
        _client.check(address)
        client = _http.Client(address)
        _ids.check(job_id, address, _client.info(client, job_id, address))
        return client, job_id, address

    def wait(self, job_id: str, timeout: float | None, notify: Notify) -> JobOutcome:
        """Until Ray says the job ended (or ``timeout``): one small Jobs API request every
        ``POLL`` seconds, each state change said once; then the outcome with its root cause."""
        client, jid, address = self._client(job_id)
        deadline = None if timeout is None else time.monotonic() + timeout
        seen = ""
        polls = 0
        while True:
            info = _client.info(client, jid, address)
            ray_state = str(getattr(info.status, "value", info.status))
            polls += 1
            if (info.status.is_terminal() or (deadline is not None and time.monotonic() >= deadline)
                    or (polls % LOST_EVERY == 0 and _client.lost_driver(address, info))):
                return self.status(job_id)
            if ray_state != seen:
                notify(f"Ray job {jid}: {ray_state.lower()}")
                seen = ray_state
            time.sleep(POLL)

    def progress_folder(self, job_id: str) -> Path | None:
        """Where the job's ranks beat (``_ids.progress_folder``; a waiting submit's live line)."""
        jid = job_id.removeprefix(PREFIX)
        return _ids.progress_folder(_ids.job_address(jid), jid)

    def status(self, job_id: str) -> JobOutcome:
        from .._progress import with_progress

        return with_progress(self._status(job_id), self.progress_folder(job_id))  # each rank's last beat

    def _status(self, job_id: str) -> JobOutcome:
        client, jid, address = self._client(job_id)
        info = _client.info(client, jid, address)
        state = _STATES.get(str(getattr(info.status, "value", info.status)), JobState.UNKNOWN)
        started = info.start_time / 1000 if info.start_time else None
        ended = info.end_time / 1000 if info.end_time else None
        details = {"address": address, "ray_status": str(getattr(info.status, "value", info.status)),
                   "entrypoint": info.entrypoint}
        lost = _client.lost_driver(address, info) if not state.terminal else ""
        if lost:
            return JobOutcome(PREFIX + jid, JobState.FAILED, JobState.FAILED.exit_code(), root_cause=lost,
                              message=f"Ray: {details['ray_status']} (its driver's node is dead)", started=started,
                              details=details)
        if not state.terminal:
            return JobOutcome(PREFIX + jid, state, message=f"Ray: {details['ray_status']}", started=started,
                              details=details)
        text = client.get_job_logs(jid)
        said = _joblog.outcome(text) or {}
        cause = str(said.get("root_cause") or "")
        if isinstance(said.get("restarts"), int):  # the driver's count of restarts
            details["restarts"] = said["restarts"]
        causes = said.get("causes")
        restarts = tuple(str(c) for c in causes) if isinstance(causes, list) else None
        if said.get("state") == "cancelled" or state is JobState.CANCELLED:
            state = JobState.CANCELLED
        elif said.get("state") == "failed":
            state = JobState.FAILED
        if state is JobState.FAILED and not cause:  # the driver did not get to say: Ray's word and the log
            cause = f"Ray: {info.message or 'the job failed'}\n" + _joblog.tail(text, 15)
        if state is JobState.CANCELLED:
            cause = cause or "stopped"
        return JobOutcome(PREFIX + jid, state, state.exit_code(), root_cause=cause if state is not JobState.SUCCEEDED
                          else "", message=f"Ray: {details['ray_status']}" + (f" ({info.message})" if info.message
                                                                               else ""),
                          started=started, ended=ended,
                          wall_s=(ended - started) if started and ended else None, details=details, restarts=restarts)

    def logs(self, job_id: str, rank: int | None, follow: bool) -> Iterator[str]:
        """The job's log (every rank's ``[rankN]`` lines and the driver's), or one rank's lines;
        ``follow``: streamed as the driver prints them (the Jobs API's log websocket, which
        starts at the log's beginning), until the job has ended."""
        client, jid, address = self._client(job_id)
        info = _client.info(client, jid, address)
        name = f"rank{rank}" if rank is not None else None
        if follow:
            # the log's websocket: Ray's own client
            for line in _joblog.lines(_client.tail(_client.client(address), jid, address)):
                if name is None:
                    yield line + "\n"
                else:
                    yield from (text + "\n" for text in _joblog.replica_lines((line,), name))
            return
        text = client.get_job_logs(jid)
        if name is not None and name not in _joblog.names(text):
            world = str((getattr(info, "metadata", None) or {}).get("distcomp_world_size", ""))
            if not info.status.is_terminal() and (not world.isdigit() or (rank or 0) < int(world)):
                return  # a running rank that has printed nothing yet: nothing to show, no error
            have = _joblog.names(text)
            raise UsageError(f"Ray job {jid}: no log of rank {rank} (logs: {', '.join(have) or 'none'})")
        lines = text.splitlines()
        for line in (_joblog.replica_lines(lines, name) if name is not None else lines):
            yield line + "\n"

    def cancel(self, job_id: str) -> JobOutcome:
        """Stop the job (SIGTERM to its driver, which stops every node's agent at once, each its
        ranks with the job's grace) and wait until Ray says it has ended: Ray marks it STOPPED
        once the driver has exited, a few tenths of a second after the ranks."""
        client, jid, address = self._client(job_id)
        info = _client.info(client, jid, address)
        if not info.status.is_terminal() and not _client.lost_driver(address, info):
            try:
                client.stop_job(jid)
            except RuntimeError as exc:
                raise JobError(f"the Ray cluster at {address} could not stop job {jid}: "
                               f"{str(exc).strip().splitlines()[-1]}; `ray job stop {jid}` on the head, or "
                               f"`distcomp status ray:{jid}` to see where it stands") from None
            deadline = time.monotonic() + CANCEL_WAIT
            while time.monotonic() < deadline and not _client.info(client, jid, address).status.is_terminal():
                time.sleep(0.1)  # a small local GET: the wait ends within 0.1 s of Ray's STOPPED
        return self.status(job_id)

    def save_logs(self, job_id: str, into: Path) -> None:
        """The job's log, and each rank's lines as ``rankN.log``, for the job's MLflow run."""
        client, jid, _address = self._client(job_id)
        text = client.get_job_logs(jid)
        (into / "job.log").write_text(text, encoding="utf-8")
        lines = text.splitlines()
        for name in _joblog.names(text):
            (into / f"{name}.log").write_text("".join(line + "\n" for line in _joblog.replica_lines(lines, name)),
                                              encoding="utf-8")
