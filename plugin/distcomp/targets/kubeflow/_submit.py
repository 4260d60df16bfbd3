"""Create a Kubeflow training job and wait for it: what the KFP step does for several nodes.

Kept thin on purpose (no cluster runs here; tests drive it over HTTP against the Kubernetes
API's own shapes): create the custom object, poll its conditions until Succeeded or Failed
(or the deadline, which deletes the job), then read the leading pod's log for the report.
Where to create it and which pod leads come from the kind's ``KubeflowJobType`` record (a
plugin's kind is submitted like a built-in one), never from a table here.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Mapping

from ...errors import JobError
from ...records import JobState

if TYPE_CHECKING:
    from ...core.plugins import PluginManager
    from ...records import KubeflowJobType

DONE = {"Succeeded": JobState.SUCCEEDED, "Complete": JobState.SUCCEEDED,  # TrainJob says Complete
        "Failed": JobState.FAILED}
LOG_LINES = 50


@dataclass(frozen=True)
class KubeflowRun:
    """How a Kubeflow job ended, as the cluster said it."""

    kind: str
    name: str
    namespace: str
    state: JobState
    reason: str  # the deciding condition's reason and message
    log: str  # the last lines of the leading pod's log ("" when none could be read)
    wall_s: float


JobOutcome = KubeflowRun  # the name earlier callers import


@dataclass(frozen=True)
class JobRef:
    """Where a job lives in the cluster, from its manifest and its kind's record."""

    kind: str
    name: str
    namespace: str
    group: str
    version: str
    plural: str
    leader: str  # the label selector of the pod whose log tells the job's story

    @property
    def id(self) -> str:
        return f"{self.namespace}/{self.kind}/{self.name}"


def ref_of(manifest: Mapping[str, Any], namespace: str, job: "KubeflowJobType") -> JobRef:
    kind, name = str(manifest["kind"]), str(manifest["metadata"]["name"])
    group, _, version = str(manifest["apiVersion"]).partition("/")
    return JobRef(kind, name, str(manifest["metadata"].get("namespace") or namespace), group, version, job.plural,
                  job.leader_selector(name))


class SubmitError(JobError, RuntimeError):
    """The API refused the job, or could not be reached."""


def job_type_of(manifest: Mapping[str, Any], pm: "PluginManager") -> "KubeflowJobType":
    """The record of ``manifest``'s kind and API version among the installed plugins' job types
    (launchers sharing a kind share its record's API facts: the first is as good as any)."""
    kind, api_version = str(manifest.get("kind")), str(manifest.get("apiVersion"))
    known = [t for t, _provider in pm.kubeflow_jobs().values()]
    for t in known:
        if t.kind == kind and t.api_version in ("", api_version):
            return t
    kinds = sorted({f"{t.kind} ({t.api_version or 'any version'})" for t in known})
    raise SubmitError(f"no installed plugin provides the Kubeflow kind {kind} of {api_version} (known: "
                      f"{', '.join(kinds) or 'none'}); install the launcher plugin that builds it")


def submit_and_wait(manifest: Mapping[str, Any], api_client: Any, namespace: str = "default",
                    timeout: float = 24 * 3600.0, poll: float = 10.0, notify: Callable[[str], None] | None = None,
                    sleep: Callable[[float], None] = time.sleep, job: "KubeflowJobType | None" = None,
                    pm: "PluginManager | None" = None) -> KubeflowRun:
    """Create ``manifest`` in ``namespace`` and wait for it to end (``api_client``: a
    ``kubernetes.client.ApiClient``, configured for the cluster). ``job``: the kind's record
    (default: looked up by kind and API version in ``pm``, the installed plugins). Ctrl-C
    while waiting deletes the job."""
    if job is None:
        from ...core.plugins import get_plugin_manager

        job = job_type_of(manifest, pm or get_plugin_manager())
    ref = ref_of(manifest, namespace, job)
    start = time.monotonic()
    create(ref, manifest, api_client, notify)
    try:
        return watch(ref, api_client, timeout, poll, notify, sleep, start)
    except KeyboardInterrupt:  # Ctrl-C, or SIGTERM turned into one by the caller: nothing runs on
        return KubeflowRun(ref.kind, ref.name, ref.namespace, JobState.CANCELLED,
                           delete(ref, api_client, "stopped while waiting"), leader_log(ref, api_client),
                           time.monotonic() - start)


def create(ref: JobRef, manifest: Mapping[str, Any], api_client: Any,
           notify: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Create the job; the object as the API server returned it (its uid, for owned objects)."""
    from kubernetes.client import CustomObjectsApi
    from kubernetes.client.exceptions import ApiException
    from urllib3.exceptions import HTTPError

    try:
        created = CustomObjectsApi(api_client).create_namespaced_custom_object(ref.group, ref.version, ref.namespace,
                                                                               ref.plural, dict(manifest))
    except ApiException as exc:
        raise SubmitError(f"the cluster refused {ref.kind} {ref.namespace}/{ref.name}: {exc.status} {exc.reason}: "
                          f"{(exc.body or '')[:500]}") from None
    except (OSError, HTTPError) as exc:  # urllib3's connection errors are not OSErrors
        raise SubmitError(f"cannot reach the Kubernetes API: {exc}") from None
    if notify is not None:
        notify(f"created {ref.kind} {ref.namespace}/{ref.name}")
    return dict(created) if isinstance(created, Mapping) else {}


def create_owned(ref: JobRef, job: Mapping[str, Any], obj: Mapping[str, Any], api_client: Any,
                 notify: Callable[[str], None] | None = None) -> None:
    """Create ``obj`` (a ConfigMap, or the job's Secret) owned by the job, so the cluster deletes
    it with the job; when it cannot be made the job cannot run, so the job is deleted and the
    error raised."""
    from kubernetes.client import CoreV1Api
    from kubernetes.client.exceptions import ApiException
    from urllib3.exceptions import HTTPError

    meta = job.get("metadata") or {}
    body = {**obj, "metadata": {**obj["metadata"], "namespace": ref.namespace}}
    if meta.get("uid"):
        body["metadata"]["ownerReferences"] = [{"apiVersion": f"{ref.group}/{ref.version}", "kind": ref.kind,
                                                "name": ref.name, "uid": meta["uid"]}]
    core = CoreV1Api(api_client)
    name = body["metadata"]["name"]
    kind = str(obj.get("kind") or "ConfigMap")
    what = "the job's secrets" if kind == "Secret" else "the code"
    try:
        for attempt in range(STALE_TRIES):
            try:
                getattr(core, f"create_namespaced_{_SNAKE[kind]}")(ref.namespace, body)
                break
            except ApiException as exc:
                # the same job name submitted again before the cluster collected the last one's code
                if exc.status != 409 or attempt == STALE_TRIES - 1 or \
                        not _drop_stale(core, ref, name, meta.get("uid"), kind):
                    raise
                time.sleep(1.0)
    except ApiException as exc:
        why = f"the cluster refused {kind} {ref.namespace}/{name}: {exc.status} {exc.reason}"
        if exc.status == 409:
            why += f" (a {kind} of that name that distcomp did not make for this job: choose another --name)"
        raise SubmitError(f"{delete(ref, api_client, why)}: {(exc.body or '')[:300]}") from None
    except (OSError, HTTPError) as exc:
        raise SubmitError(delete(ref, api_client, f"cannot create the {kind} of {what} ({exc})")) from None
    if notify is not None:
        notify(f"created {kind} {ref.namespace}/{body['metadata']['name']} ({what}, deleted with the job)")


STALE_TRIES = 5
_SNAKE = {"ConfigMap": "config_map", "Secret": "secret"}  # the kinds a job owns: CoreV1Api's method names


def _drop_stale(core: Any, ref: JobRef, name: str, uid: str | None, kind: str = "ConfigMap") -> bool:
    """Delete the ConfigMap (or Secret) ``name`` when it is an earlier job's (distcomp's label for
    this job name, owned by another uid, or by none); False when it is someone else's."""
    from kubernetes.client.exceptions import ApiException

    try:
        old = getattr(core, f"read_namespaced_{_SNAKE[kind]}")(name, ref.namespace)
    except ApiException as exc:
        return exc.status == 404  # gone meanwhile: create again
    labels = old.metadata.labels or {}
    owners = [o.uid for o in old.metadata.owner_references or []]
    if labels.get("distcomp.dev/job") != ref.name or labels.get("app.kubernetes.io/managed-by") != "distcomp" \
            or (uid is not None and uid in owners):
        return False
    try:
        getattr(core, f"delete_namespaced_{_SNAKE[kind]}")(name, ref.namespace)
    except ApiException as exc:
        return exc.status == 404
    return True


def read(ref: JobRef, api_client: Any) -> dict[str, Any] | None:
    """The job's object, or None when it is gone; SubmitError when it cannot be read."""
    from kubernetes.client import CustomObjectsApi
    from kubernetes.client.exceptions import ApiException

    try:
        obj = CustomObjectsApi(api_client).get_namespaced_custom_object(ref.group, ref.version, ref.namespace,
                                                                        ref.plural, ref.name)
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise SubmitError(f"cannot read {ref.kind} {ref.namespace}/{ref.name}: {exc.status} {exc.reason}") from None
    return dict(obj)


def state_of(obj: Mapping[str, Any]) -> tuple[JobState, str]:
    """The job's state and the condition that says so (the training operators' conditions)."""
    last = ""
    state = JobState.PENDING
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("status") != "True":
            continue
        text = f"{cond.get('type')}: {cond.get('reason', '')} {cond.get('message', '')}".strip()
        if cond.get("type") in DONE:
            return DONE[cond["type"]], text
        if cond.get("type") in ("Running", "Restarting"):
            state, last = JobState.RUNNING, text
        elif cond.get("type") in ("Created", "Suspended"):
            last = text
    return state, last


def watch(ref: JobRef, api_client: Any, timeout: float, poll: float, notify: Callable[[str], None] | None = None,
          sleep: Callable[[float], None] = time.sleep, start: float | None = None) -> KubeflowRun:
    """Poll the job's conditions until it ends, or delete it at ``timeout`` seconds after ``start``."""
    from urllib3.exceptions import HTTPError

    say = notify or (lambda _m: None)
    start = time.monotonic() if start is None else start
    seen = ""
    state: JobState | None = None
    reason = ""
    while state is None:
        if time.monotonic() - start > timeout:
            state, reason = JobState.TIMED_OUT, delete(ref, api_client, f"no end after {timeout:g} s")
            break
        sleep(poll)
        try:
            obj = read(ref, api_client)
        except (OSError, HTTPError) as exc:  # a blip between polls: the job runs on; ask again
            say(f"cannot read {ref.kind} {ref.name} ({exc}); retrying")
            continue
        if obj is None:
            state, reason = JobState.FAILED, "the job was deleted while it ran"
            break
        now, text = state_of(obj)
        if now.terminal:
            state, reason = now, text
        elif text and text != seen:
            seen = text
            say(f"{ref.kind} {ref.name}: {text}")
    return KubeflowRun(ref.kind, ref.name, ref.namespace, state, reason, leader_log(ref, api_client),
                       time.monotonic() - start)


def delete(ref: JobRef, api_client: Any, why: str) -> str:
    """End the job (and its pods: Foreground) and say so; a job that cannot be deleted is named."""
    from kubernetes.client import CustomObjectsApi
    from kubernetes.client.exceptions import ApiException
    from urllib3.exceptions import HTTPError

    try:
        CustomObjectsApi(api_client).delete_namespaced_custom_object(ref.group, ref.version, ref.namespace,
                                                                     ref.plural, ref.name,
                                                                     propagation_policy="Foreground")
        return f"{why}; the job was deleted"
    except (OSError, ApiException, HTTPError) as exc:
        return f"{why}, and deleting the job failed ({exc}): delete {ref.kind} {ref.namespace}/{ref.name} by hand"


def leader_log(ref: JobRef, api_client: Any, lines: int | None = LOG_LINES) -> str:
    """The last lines of the leading pod's log (all of it: ``lines=None``); "" when none can be read."""
    from kubernetes.client import CoreV1Api

    return _leader_log(CoreV1Api(api_client), ref.leader, ref.namespace, lines)


def _leader_log(core: Any, selector: str, namespace: str, lines: int | None = LOG_LINES) -> str:
    """The last lines of the leading pod's log; the job's outcome stands without it."""
    from kubernetes.client.exceptions import ApiException
    from urllib3.exceptions import HTTPError

    if not selector:  # the kind's record names no leading pod
        return ""
    try:
        pods = core.list_namespaced_pod(namespace, label_selector=selector).items
        if not pods:
            return ""
        more = {"tail_lines": lines} if lines is not None else {}
        return str(core.read_namespaced_pod_log(pods[0].metadata.name, namespace, **more))
    except (ApiException, OSError, HTTPError):
        return ""
