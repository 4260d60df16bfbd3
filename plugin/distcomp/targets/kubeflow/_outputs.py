"""Where a Kubeflow job's outputs go, so that they outlast the pods.

A pod's own disk goes with the pod: an output written there is lost when the job ends, and
nothing would say so. So each output is one of:

- on a volume (``--volume CLAIM:/data``): by default ``/data/distcomp/JOB/outputs/NAME``, or a
  given ``--output-path`` under the mount;
- in the object store (``--store s3://BUCKET/PREFIX``): written to ``/distcomp/outputs/NAME``
  and uploaded by node 0 to ``PREFIX/outputs/JOB/NAME/`` once the command succeeded; submit
  downloads them (``--download DIR``) or prints where they are;
- scratch (``--scratch NAME``): the user says it may be lost.

Anything else is a compile error naming the three ways.
"""

from __future__ import annotations

import posixpath
import shlex
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from ._errors import CompileError
from ._pod import escape

if TYPE_CHECKING:
    from ._code import CodePlan
    from ...delivery.store import StoreURI

STORE_DIR = "/distcomp/outputs"
VOLUME = "distcomp-outputs"
UPLOADING_KINDS = ("PyTorchJob", "TrainJob")  # node 0 is known in every pod: PET_NODE_RANK


@dataclass(frozen=True)
class OutputPlan:
    paths: Mapping[str, str]  # output -> its path in the pods
    where: Mapping[str, str]  # output -> where it lasts, for the user: "pvc CLAIM:/path", "s3://...", "scratch"
    uploads: Mapping[str, str] = field(default_factory=dict)  # output -> the store key prefix it is uploaded to

    def notes(self) -> list[str]:
        return [f"output '{name}': {where}" if where.startswith("pvc ") else
                f"output '{name}': {self.paths[name]} -> {where}" for name, where in self.where.items()]


def _under(path: str, mount: str) -> bool:
    path, mount = posixpath.normpath(path), posixpath.normpath(mount)
    return path == mount or path.startswith(mount.rstrip("/") + "/")


def plan_outputs(names: Sequence[str], given: Mapping[str, str], volumes: Mapping[str, str], job: str,
                 store: "StoreURI | None", scratch: Sequence[str]) -> OutputPlan:
    """Each output's path in the pods and where it lasts; CompileError for one that would not."""
    unknown = [n for n in scratch if n not in names]
    if unknown:
        raise CompileError(f"--scratch {unknown[0]}: no such output (outputs: {', '.join(names) or 'none'})")
    paths: dict[str, str] = {}
    where: dict[str, str] = {}
    uploads: dict[str, str] = {}
    problems: list[str] = []
    first = next(iter(volumes.items()), None)
    for name in names:
        path = given.get(name)
        if path is not None and not path.startswith("/"):
            problems.append(f"--output-path {name}={path}: give an absolute path inside the pod")
            continue
        claim = next((c for c, mount in volumes.items() if path is not None and _under(path, mount)), None)
        if path is None:
            if first is not None:
                claim, path = first[0], posixpath.join(first[1], "distcomp", job, "outputs", name)
            elif store is not None:
                path = posixpath.join(STORE_DIR, name)
            else:
                path = f"/outputs/{name}"
        paths[name] = path
        if claim is not None:
            where[name] = f"pvc {claim}:{path}"
        elif store is not None:
            uploads[name] = store.key(f"outputs/{job}/{name}")
            where[name] = f"s3://{store.bucket}/{uploads[name]}/"
        elif name in scratch:
            where[name] = "scratch (lost with the pod)"
        else:
            problems.append(f"output '{name}' would be written to {path} on the pod's own disk and lost when the pod "
                            "ends: give --volume CLAIM:/data (it then goes to /data/distcomp/JOB/outputs/"
                            f"{name}), --store s3://BUCKET/PREFIX (uploaded when the job succeeds), or --scratch "
                            f"{name} if it may be lost")
    if problems:
        raise CompileError("\n".join(problems))
    return OutputPlan(paths, where, uploads)


def apply(manifest: dict[str, Any], plan: OutputPlan, code: "CodePlan") -> dict[str, Any]:
    """Node 0 uploads the outputs that go to the store once the command succeeded (every pod
    runs the same wrapper; only ``PET_NODE_RANK`` 0 uploads)."""
    from ._code import SHELL, add_env, store_env
    from ._settings import replica_specs

    if not plan.uploads:
        return manifest
    kind = str(manifest.get("kind"))
    if kind not in UPLOADING_KINDS:
        names = ", ".join(plan.uploads)
        raise CompileError(f"a {kind} cannot upload its outputs ({names}) to the store: its rank 0 runs in a pod "
                           "that does not end with the job; give --volume CLAIM:/data for them instead")
    assert code.store is not None
    uploads = " && ".join(f'python -c "$DISTCOMP_PODSTORE" put-tree {shlex.quote(plan.paths[n])} '
                          f"{shlex.quote(code.store.bucket)} {shlex.quote(key)}" for n, key in plan.uploads.items())
    # the shell passes a stop (SIGTERM) on to the command, and uploads only after success
    line = ('"$0" "$@" & pid=$!; trap \'kill -TERM $pid 2>/dev/null\' TERM INT; wait $pid; rc=$?; '
            "while kill -0 $pid 2>/dev/null; do wait $pid; rc=$?; done; "
            f'if [ $rc -eq 0 ] && [ "${{PET_NODE_RANK:-0}}" = 0 ]; then {uploads} || rc=1; fi; exit $rc')
    env = store_env(code, source=True)
    # an emptyDir holds them until uploaded: it outlives a restarted container, not the pod
    scratch = any(_under(plan.paths[n], STORE_DIR) for n in plan.uploads)
    volume, mount = {"name": VOLUME, "emptyDir": {}}, {"name": VOLUME, "mountPath": STORE_DIR}
    if kind == "TrainJob":
        from ._trainjob import node_container, node_patch

        containers = [manifest["spec"]["trainer"]]
        if scratch:
            pod = node_patch(manifest["spec"])
            pod.setdefault("volumes", []).append(volume)
            node_container(pod).setdefault("volumeMounts", []).append(mount)
    else:
        containers = []
        for replica in replica_specs(manifest).values():
            pod = replica["template"]["spec"]
            containers.append(pod["containers"][0])
            if scratch:
                pod.setdefault("volumes", []).append(dict(volume))
                pod["containers"][0].setdefault("volumeMounts", []).append(dict(mount))
    for c in containers:
        c["command"] = [*SHELL, escape([line])[0], *c["command"]]
        add_env(c, env)
    return manifest
