"""The kubeflow target on the target contract. A job is ``NAMESPACE/KIND/NAME``; its MLflow run
is the core's (``distcomp.core.target``: created before the job, its env given to every pod, ended
by the job handle with the job), named in the job's annotations too, so a process that did
not submit the job (``distcomp status`` on another machine) finds it.

The cluster is found as kubectl finds it: in a pod its service account, else the kubeconfig
(``--kubeconfig`` when submitting, ``$KUBECONFIG`` or ``~/.kube/config`` afterwards).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Mapping

from ...errors import UsageError
from ...records import JobOutcome, JobState, TrackingRef
from ...core.target import Compiled, Notify, Target
from ._bind import RUN_ID, TRACKING_URI
from ._job import KubeflowJob, job_of

if TYPE_CHECKING:
    from ...records import Plan
    from ...spec import ComponentSpec
    from ...core.target import JobContext
    from ._submit import JobRef, KubeflowRun

__all__ = ["RUN_ID", "TRACKING_URI", "KubeflowTarget", "kube_client"]

OUTPUTS = "distcomp.io/outputs"  # output name -> where it lasts (JSON), for status of a detached job
DEFAULT_TIMEOUT = 24 * 3600.0
PREFIX = "kubeflow:"


def kube_client(kubeconfig: str | None) -> Any:
    """In a pod, its service account; elsewhere the kubeconfig (``kubeconfig``, $KUBECONFIG)."""
    from kubernetes import client, config
    from kubernetes.config.config_exception import ConfigException

    try:
        if kubeconfig is None and os.environ.get("KUBERNETES_SERVICE_HOST"):
            config.load_incluster_config()
        else:
            config.load_kube_config(config_file=kubeconfig)
    except (ConfigException, OSError, TypeError) as exc:
        raise UsageError(f"no Kubernetes configuration ({exc}); pass --kubeconfig FILE or set KUBECONFIG") from None
    return client.ApiClient()


class KubeflowTarget(Target):
    def __init__(self) -> None:
        self._api: Any = None
        self._options: Mapping[str, Any] = {}
        self._tracking: TrackingRef | None = None  # the job's MLflow run (the core's), for wait
        self._job: KubeflowJob | None = None  # the job this instance submitted

    def has_gpu(self, spec: "ComponentSpec", options: Mapping[str, Any]) -> bool | None:
        """The pods' machines are not this one: no GPU advice from here."""
        return False

    def compile(self, plan: "Plan", options: Mapping[str, Any]) -> Compiled:
        """The job's manifest (and its code's ConfigMap), built once: what ``submit`` creates,
        with only the job's MLflow run bound (``_bind``). ``--inherit-pod`` reads this pod."""
        import json

        import yaml

        from ._bind import LATE

        said: list[str] = []
        if options.get("inherit_pod"):  # the step's own pod settings are part of what runs
            from ._inherit import inherit_options

            options = inherit_options(options, kube_client(options.get("kubeconfig")), said.append)
        job = job_of(plan, options)
        manifest = job.manifest
        # where each output lasts, for `distcomp status` of a detached job from any machine
        manifest["metadata"].setdefault("annotations", {})[OUTPUTS] = json.dumps(dict(job.outputs.where),
                                                                                  sort_keys=True)
        kind = f"{manifest['kind']} {manifest['metadata']['name']}"
        if len(job.objects()) > 1:
            kind += " and the ConfigMap of its code"
        text = yaml.safe_dump_all(job.objects(), sort_keys=False)
        if job.secret is None:
            return Compiled(kind=kind, text=text, data=manifest, notes=(*said, *job.notes()), late=LATE, native=job)
        from ._secretref import masked_text, secret_notes, writer

        # shown: the job, and its Secret only as comments with every value masked; written (--out):
        # the job, and the Secret in a file of its own beside it, mode 600
        shown = text + "# the job reads its secrets from this Secret, which must exist first (values masked here; " \
            "`distcomp compile --out FILE` writes it, mode 600, beside FILE):\n" + masked_text(job.secret)
        return Compiled(kind=kind, text=shown, writer=writer(text, job.secret), data=manifest,
                        notes=(*said, *job.notes(), *secret_notes(job.secret)), late=LATE, native=job)

    # -- submitting ------------------------------------------------------------------------
    def tracking_uri(self, options: Mapping[str, Any], notify: Notify) -> str | None:
        """The pods reach a tracking server, not a file on this machine."""
        uri = os.environ.get("MLFLOW_TRACKING_URI", "")
        if not uri.startswith(("http://", "https://")):
            notify("MLflow tracking is off: the pods need a tracking server (MLFLOW_TRACKING_URI=http://...); "
                   "--no-tracking silences this")
            return None
        return uri

    def submit(self, job: "JobContext", options: Mapping[str, Any], notify: Notify) -> str:
        """Create what ``compile`` made (``job.compiled``), the job's MLflow run bound into it."""
        from ...core.plugins import get_plugin_manager
        from ._bind import bind_run
        from ._submit import create, create_owned, job_type_of, ref_of

        compiled = job.compiled
        built: KubeflowJob = compiled.native
        for note in compiled.notes:
            notify(note)
        self._options = options
        self._api = kube_client(options.get("kubeconfig"))
        if built.code.mode == "store":
            from ...delivery.transfer import upload

            upload(built.code, notify)
        manifest, reached = bind_run(built.manifest, job.env, job.tracking)
        if not reached:
            notify(f"warning: the MLflow run's env cannot reach the pods of a {manifest['kind']} (distcomp knows no "
                   "pod template of it): its ranks do not log into the run")
        self._tracking = job.tracking
        ref = ref_of(manifest, options.get("namespace") or "default", job_type_of(manifest, get_plugin_manager()))
        self._job = built
        created = create(ref, manifest, self._api, notify)
        # the code's ConfigMap and the job's Secret, owned by the job: deleted with it
        for obj in [*built.objects()[:-1], *([built.secret] if built.secret is not None else [])]:
            create_owned(ref, created, obj, self._api, notify)
        return ref.id

    def save_logs(self, job_id: str, into: Path) -> None:
        """The leading pod's log (rank 0's), for the job's MLflow run."""
        (into / "leader.log").write_text("".join(self.logs(job_id, None, False)), encoding="utf-8")

    # -- a submitted job -------------------------------------------------------------------
    def _client(self) -> Any:
        if self._api is None:
            self._api = kube_client(None)
        return self._api

    def _ref(self, job_id: str) -> "JobRef":
        from ...core.plugins import get_plugin_manager
        from ._submit import JobRef

        namespace, kind, name = (job_id[len(PREFIX):] if job_id.startswith(PREFIX) else job_id).split("/", 2) \
            if job_id.count("/") == 2 else ("", "", "")
        if not name:
            raise UsageError(f"{job_id!r} is not a Kubeflow job id: expected NAMESPACE/KIND/NAME")
        types = [t for t, _p in get_plugin_manager().kubeflow_jobs().values() if t.kind == kind]
        if not types:
            raise UsageError(f"no installed plugin knows the Kubeflow kind {kind!r}")
        t = types[0]
        group, _, version = t.api_version.partition("/")
        return JobRef(kind, name, namespace, group, version, t.plural, t.leader_selector(name))

    def wait(self, job_id: str, timeout: float | None, notify: Notify) -> JobOutcome:
        from ._submit import watch

        limit = timeout if timeout is not None else self._options.get("timeout") or DEFAULT_TIMEOUT
        ended = watch(self._ref(job_id), self._client(), limit, float(self._options.get("poll", 10.0)), notify)
        return self._outcome(ended, notify, ref=self._ref(job_id))

    def status(self, job_id: str) -> JobOutcome:
        from ._submit import KubeflowRun, leader_log, read, state_of

        ref = self._ref(job_id)
        obj = read(ref, self._client())
        if obj is None:
            return JobOutcome(PREFIX + ref.id, JobState.UNKNOWN, message=f"{ref.kind} {ref.id} is not in the cluster "
                              "(deleted, or never created)")
        state, text = state_of(obj)
        notes = (obj.get("metadata") or {}).get("annotations") or {}
        if state.terminal:
            log = leader_log(ref, self._client())
            return self._outcome(KubeflowRun(ref.kind, ref.name, ref.namespace, state, text, log, 0.0), None, notes,
                                 ref)
        return JobOutcome(PREFIX + ref.id, state, message=text, tracking=_tracking_ref(notes))

    def logs(self, job_id: str, rank: int | None, follow: bool) -> Iterator[str]:
        """The leading pod's log (rank 0 runs in it), or the log of the pod that holds ``rank``
        (its node's, by the kind's layout); ``follow``: until the job has ended."""
        from kubernetes.client import CoreV1Api

        from ._ranks import rank_pod
        from ._submit import _leader_log, read, state_of

        ref = self._ref(job_id)
        selector = ref.leader
        if rank is not None:
            obj = read(ref, self._client())
            if obj is None:
                raise UsageError(f"{ref.kind} {ref.id} is not in the cluster (deleted, or never created)")
            selector, _what = rank_pod(obj, rank)
        sent = 0
        while True:
            obj = read(ref, self._client())
            done = obj is None or state_of(obj)[0].terminal
            lines = _leader_log(CoreV1Api(self._client()), selector, ref.namespace, None).splitlines(keepends=True)
            yield from (line if line.endswith("\n") else line + "\n" for line in lines[sent:])
            sent = len(lines)
            if not follow or done:
                return
            time.sleep(float(self._options.get("poll", 2.0)))

    def cancel(self, job_id: str) -> JobOutcome:
        from ._submit import KubeflowRun, delete, leader_log, read, state_of

        ref = self._ref(job_id)
        obj = read(ref, self._client())
        if obj is None or state_of(obj)[0].terminal:
            return self.status(job_id)
        notes = (obj.get("metadata") or {}).get("annotations") or {}
        log = leader_log(ref, self._client())
        reason = delete(ref, self._client(), "cancelled")
        return self._outcome(KubeflowRun(ref.kind, ref.name, ref.namespace, JobState.CANCELLED, reason, log, 0.0),
                             None, notes)

    # -- the end -----------------------------------------------------------------------------
    def _outcome(self, ended: "KubeflowRun", notify: Notify | None,
                 notes: Mapping[str, str] | None = None, ref: "JobRef | None" = None) -> JobOutcome:
        cause = ""
        if ended.state is not JobState.SUCCEEDED:
            cause = f"{ended.kind} {ended.namespace}/{ended.name} {ended.state.value}: {ended.reason}"
            failed = None
            if ended.state is JobState.FAILED and ref is not None:
                from ._failures import first_failed

                failed = first_failed(self._client(), ref.leader, ref.namespace)
            if failed is not None:  # its lines, unless they are the leading pod's own (below)
                leader = failed.log.strip() and failed.log.strip() in ended.log
                cause += "\n" + (failed.headline if leader else failed.describe())
            if ended.log:
                tail = "\n".join("  " + line for line in ended.log.splitlines()[-15:])
                cause += f"\nlast lines of the leading pod's log:\n{tail}"
        tracking = _tracking_ref(notes) if notes is not None else self._tracking
        outputs = _outputs_of(notes) if notes is not None else dict(self._job.outputs.where) if self._job else {}
        download = self._options.get("download")
        if ended.state is JobState.SUCCEEDED and download and self._job is not None and self._job.outputs.uploads:
            from ._transfer import download

            outputs.update(download(self._job, Path(str(download)), notify))
        return JobOutcome(f"{PREFIX}{ended.namespace}/{ended.kind}/{ended.name}", ended.state,
                          ended.state.exit_code(), root_cause=cause, message=ended.reason, outputs=outputs,
                          wall_s=ended.wall_s or None, tracking=tracking,
                          details={"kind": ended.kind, "leader_log": ended.log})


def _outputs_of(notes: Mapping[str, str]) -> dict[str, str]:
    import json

    try:
        found = json.loads(notes.get(OUTPUTS) or "{}")
    except ValueError:
        return {}
    return {str(k): str(v) for k, v in found.items()} if isinstance(found, dict) else {}


def _tracking_ref(notes: Mapping[str, str]) -> TrackingRef | None:
    run_id = notes.get(RUN_ID)
    return TrackingRef(run_id, notes.get(TRACKING_URI, "")) if run_id else None
