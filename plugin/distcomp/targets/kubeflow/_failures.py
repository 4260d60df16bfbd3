"""The pod that failed first in a failed Kubeflow job, and its last lines.

The leading pod's log tells the job's story, but when a worker's rank fails, the leader
often shows only a timeout or a broken connection. The operators label every pod with the
job's name (the first term of the kind's leader selector), so the pods whose containers
ended with a non-zero code are found, and the first of them (by when it ended) is named,
with its exit code, the kubelet's reason (``OOMKilled``, ``Error``) and its last lines.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

LINES = 30


@dataclass(frozen=True)
class FailedPod:
    pod: str
    container: str
    exit_code: int
    reason: str  # the kubelet's: Error, OOMKilled, ContainerCannotRun, ...
    log: str  # its last lines ("" when they cannot be read)

    @property
    def headline(self) -> str:
        head = f"first failed pod {self.pod} (container {self.container}: exit code {self.exit_code}"
        return head + (f", {self.reason})" if self.reason else ")")

    def describe(self) -> str:
        if not self.log:
            return self.headline
        tail = "\n".join("  " + line for line in self.log.splitlines()[-LINES:])
        return f"{self.headline}; its last lines:\n{tail}"


def job_selector(leader: str) -> str:
    """The selector of every pod of the job: the leader selector's first term (the job's name)."""
    return leader.split(",", 1)[0]


def first_failed(api_client: Any, leader: str, namespace: str) -> FailedPod | None:
    """The job's pod whose container ended first with a non-zero code; None when none did or
    the pods cannot be read (the job's own state stands without it)."""
    from kubernetes.client import CoreV1Api
    from kubernetes.client.exceptions import ApiException
    from urllib3.exceptions import HTTPError

    if not leader:
        return None
    core = CoreV1Api(api_client)
    try:
        pods = core.list_namespaced_pod(namespace, label_selector=job_selector(leader)).items
    except (ApiException, OSError, HTTPError):
        return None
    failed: list[tuple[Any, str, str, int, str]] = []
    for pod in pods:
        for status in (pod.status.container_statuses or []) if pod.status else []:
            ended = status.state.terminated if status.state else None
            if ended is not None and ended.exit_code:
                when = ended.finished_at.isoformat() if ended.finished_at else "~"  # unknown: last
                failed.append((when, pod.metadata.name, status.name, int(ended.exit_code), ended.reason or ""))
    if not failed:
        return None
    _when, name, container, code, reason = min(failed)
    try:
        log = str(core.read_namespaced_pod_log(name, namespace, container=container, tail_lines=LINES))
    except (ApiException, OSError, HTTPError):
        log = ""
    return FailedPod(name, container, code, reason, log)
