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
from typing import TYPE_CHECKING, Any, Callable, Literal, Mapping

from ...errors import JobError

if TYPE_CHECKING:
    from ...plugins import PluginManager
    from ...records import KubeflowJobType

State = Literal["Succeeded", "Failed", "TimedOut", "Cancelled"]
DONE = {"Succeeded": "Succeeded", "Complete": "Succeeded", "Failed": "Failed"}  # TrainJob says Complete
LOG_LINES = 50


@dataclass(frozen=True)
class JobOutcome:
    kind: str
    name: str
    namespace: str
    state: State
    reason: str  # the deciding condition's reason and message
    log: str  # the last lines of the leading pod's log ("" when none could be read)
    wall_s: float


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
                    pm: "PluginManager | None" = None) -> JobOutcome:
    """Create ``manifest`` in ``namespace`` and wait for it to end (``api_client``: a
    ``kubernetes.client.ApiClient``, configured for the cluster). ``job``: the kind's record
    (default: looked up by kind and API version in ``pm``, the installed plugins)."""
    from kubernetes.client import CoreV1Api, CustomObjectsApi
    from kubernetes.client.exceptions import ApiException
    from urllib3.exceptions import HTTPError

    say = notify or (lambda _m: None)
    kind, name = str(manifest["kind"]), str(manifest["metadata"]["name"])
    namespace = str(manifest["metadata"].get("namespace") or namespace)
    if job is None:
        from ...plugins import get_plugin_manager

        job = job_type_of(manifest, pm or get_plugin_manager())
    group, _, version = str(manifest["apiVersion"]).partition("/")
    plural, leader = job.plural, job.leader_selector(name)
    jobs = CustomObjectsApi(api_client)
    start = time.monotonic()
    try:
        jobs.create_namespaced_custom_object(group, version, namespace, plural, dict(manifest))
    except ApiException as exc:
        raise SubmitError(f"the cluster refused {kind} {namespace}/{name}: {exc.status} {exc.reason}: "
                          f"{(exc.body or '')[:500]}") from None
    except (OSError, HTTPError) as exc:  # urllib3's connection errors are not OSErrors
        raise SubmitError(f"cannot reach the Kubernetes API: {exc}") from None
    say(f"created {kind} {namespace}/{name}")
    seen = ""
    state: State | None = None
    reason = ""
    def delete(why: str) -> str:
        """End the job (and its pods: Foreground) and say so; a job we cannot delete is named."""
        try:
            jobs.delete_namespaced_custom_object(group, version, namespace, plural, name,
                                                 propagation_policy="Foreground")
            return f"{why}; the job was deleted"
        except (ApiException, OSError, HTTPError) as exc:
            return f"{why}, and deleting the job failed ({exc}): delete {kind} {namespace}/{name} by hand"

    try:
        while state is None:
            if time.monotonic() - start > timeout:
                state, reason = "TimedOut", delete(f"no end after {timeout:g} s")
                break
            sleep(poll)
            try:
                obj = jobs.get_namespaced_custom_object(group, version, namespace, plural, name)
            except ApiException as exc:
                if exc.status == 404:
                    state, reason = "Failed", "the job was deleted while it ran"
                    break
                raise SubmitError(f"cannot read {kind} {namespace}/{name}: {exc.status} {exc.reason}") from None
            except (OSError, HTTPError) as exc:  # a blip between polls: the job runs on; ask again
                say(f"cannot read {kind} {name} ({exc}); retrying")
                continue
            for cond in (obj.get("status") or {}).get("conditions") or []:
                if cond.get("status") != "True":
                    continue
                text = f"{cond.get('type')}: {cond.get('reason', '')} {cond.get('message', '')}".strip()
                if cond.get("type") in DONE:
                    state, reason = DONE[cond["type"]], text  # type: ignore[assignment]
                    break
                if text != seen and cond.get("type") in ("Created", "Running", "Restarting", "Suspended"):
                    seen = text
                    say(f"{kind} {name}: {text}")
    except KeyboardInterrupt:  # Ctrl-C, or SIGTERM turned into one by the caller: nothing runs on
        state, reason = "Cancelled", delete("stopped while waiting")
    return JobOutcome(kind, name, namespace, state, reason, _leader_log(CoreV1Api(api_client), leader, namespace),
                      time.monotonic() - start)


def _leader_log(core: Any, selector: str, namespace: str) -> str:
    """The last lines of the leading pod's log; the job's outcome stands without it."""
    from kubernetes.client.exceptions import ApiException
    from urllib3.exceptions import HTTPError

    if not selector:  # the kind's record names no leading pod
        return ""
    try:
        pods = core.list_namespaced_pod(namespace, label_selector=selector).items
        if not pods:
            return ""
        return str(core.read_namespaced_pod_log(pods[0].metadata.name, namespace, tail_lines=LOG_LINES))
    except (ApiException, OSError, HTTPError):
        return ""
