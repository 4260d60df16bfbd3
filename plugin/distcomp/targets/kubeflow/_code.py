"""How a job's code and extra packages get into its pods, when the image does not hold them.

Three ways, as the peers do it (``--code``; ``auto`` picks and says why):

- ``image``: the image holds the code (baked in: ``distcomp build-context``; or on a volume,
  with ``--workdir``); nothing is shipped.
- ``configmap``: small code travels with the job: a ConfigMap, created at submit and owned by
  the job (deleted with it), mounted read-only as the code folder. A ConfigMap holds at most
  1 MiB (etcd's object limit), so this is for a few scripts.
- ``store``: an S3-compatible object store the user names (``--store s3://BUCKET/PREFIX``):
  submit uploads the code folder as a reproducible tar.gz named by its sha256 (an unchanged
  folder is not uploaded again), and an init container in every pod fetches it into a shared
  emptyDir, checking the hash first (nothing runs that the hash did not cover). The fetcher is
  the core's stdlib step (``distcomp.delivery``), so the image needs nothing beyond Python.

``--packages``: pip installs them in every pod before the command starts (Kubeflow SDK's
``packages_to_install``); pip skips what the image already has. An MPIJob's workers report
ready only once installed, so the launcher's mpirun never starts a rank before its packages.
"""

from __future__ import annotations

import base64
import re
import shlex
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from ...delivery.plan import Delivery, size_text
from ._errors import CompileError
from ._pod import MANAGED_BY, escape

if TYPE_CHECKING:
    from ...spec import ComponentSpec

MODES = ("auto", "image", "configmap", "store")
CODE_DIR = "/distcomp/code"
VOLUME = "distcomp-code"
FETCH_CONTAINER = "distcomp-code"
# etcd refuses objects over 1.5 MiB, and Kubernetes documents 1 MiB for a ConfigMap; leave room
# for the keys, items and metadata
CONFIGMAP_MAX = 1000 * 1024 - 24 * 1024
READY_FILE = "/tmp/distcomp-packages-ready"
SHELL = ("/bin/sh", "-c")
_KEY = re.compile(r"[^-._a-zA-Z0-9]+")


@dataclass(frozen=True)
class CodePlan(Delivery):
    """The core's delivery plan, with what is Kubernetes's own: the Secret holding the store's
    AWS_* credentials, which the fetching container reads (never in clear in a manifest)."""

    secret: str | None = None

    @property
    def workdir(self) -> str | None:
        return CODE_DIR if self.mode in ("configmap", "store") else None

    def note(self) -> str:
        if self.mode == "image":
            return f"code: the image's ({self.why})"
        return self.shipped(CODE_DIR)


def code_files(spec: "ComponentSpec") -> dict[str, Path]:
    """The code folder's files as a publish would take them (no .git, .venv, caches, .env, runs/)."""
    from ...delivery.code import code_files as files

    return files(spec, CompileError)


def _configmap_bytes(files: Mapping[str, Path]) -> int:
    total = 0
    for path in files.values():
        data = path.read_bytes()
        total += len(data) if _text(data) is not None else (len(data) + 2) // 3 * 4
    return total


def _text(data: bytes) -> str | None:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def plan_code(spec: "ComponentSpec", options: Mapping[str, Any], env: Mapping[str, str]) -> CodePlan:
    """The CodePlan ``options`` (``code``, ``store``, ``store_secret``, ``store_endpoint``,
    ``packages``, ``workdir``) give for ``spec``; ``env``: where the store's endpoint and region
    are read when not given (AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL, AWS_REGION). The store's
    settings are kept whatever the mode: the outputs may go there though the code does not."""
    mode = str(options.get("code") or "auto")
    packages = tuple(str(p) for p in options.get("packages") or ())
    for p in packages:
        if not p.strip() or p.startswith("-"):
            raise CompileError(f"--packages {p!r}: give a requirement (name, name==1.2, name>=1), not a pip option")
    if mode not in MODES:
        raise CompileError(f"--code {mode}: give one of {', '.join(MODES)}")
    store = None
    if options.get("store"):
        from ...delivery.store import StoreURI

        store = StoreURI.parse(str(options["store"]))
    if mode == "store" and store is None:
        raise CompileError("--code store needs --store s3://BUCKET/PREFIX (an S3-compatible bucket the pods can read)")
    from ...delivery.plan import store_settings

    endpoint, region = store_settings(env)
    endpoint = options.get("store_endpoint") or endpoint
    secret = options.get("store_secret")
    base = CodePlan("image", "", packages=packages, store=store, secret=str(secret) if secret else None,
                    endpoint=str(endpoint) if endpoint and store else None, region=region if store else None)
    no_source = not spec.code.is_dir()  # a spec with no file (a function's) ships its code folder alone
    if mode in ("configmap", "store") and no_source:
        raise CompileError(f"--code {mode}: {spec.ref}'s code folder {spec.code} does not exist on this machine; "
                           "give the spec's code: a folder that holds its code")
    if mode == "auto":
        if options.get("workdir"):
            return replace(base, why=f"--workdir {options['workdir']} given: the code is expected there")
        if no_source:
            return replace(base, why="the spec has no code folder here")
    if mode == "image":
        return replace(base, why="--code image")
    files = code_files(spec)
    size = sum(p.stat().st_size for p in files.values())
    encoded = _configmap_bytes(files) if mode == "configmap" or (mode == "auto" and store is None) else 0
    if mode == "auto":
        if store is not None:
            mode, why = "store", "--store given"
        elif encoded <= CONFIGMAP_MAX:
            mode, why = "configmap", f"small enough for a ConfigMap (<= {size_text(CONFIGMAP_MAX)})"
        else:
            return replace(base, why=f"the code folder {spec.code} ({size_text(size)}) is too large for a ConfigMap; the "
                           "image must hold it: give --store s3://BUCKET/PREFIX to ship it, or build an image with "
                           "`distcomp build-context`")
    else:
        why = f"--code {mode}"
    if mode == "configmap":
        if encoded > CONFIGMAP_MAX:
            raise CompileError(f"--code configmap: the code folder {spec.code} holds {size_text(encoded)} once encoded, "
                               f"over a ConfigMap's {size_text(CONFIGMAP_MAX)}; use --store s3://BUCKET/PREFIX or "
                               "--code image")
        return replace(base, mode="configmap", why=why, files=files, size=size)
    from ...delivery.plan import in_store

    return in_store(base, files, why)


def configmap_name(job: str) -> str:
    return f"{job}-code"


def configmap(plan: CodePlan, job: str, namespace: str | None) -> dict[str, Any]:
    """The ConfigMap holding the code: one key per file (text as ``data``, other bytes as
    ``binaryData``); ``items`` in the pods' volume lay the keys out as the folder."""
    data: dict[str, str] = {}
    binary: dict[str, str] = {}
    for key, (_rel, path) in zip(_keys(plan.files), sorted(plan.files.items())):
        raw = path.read_bytes()
        text = _text(raw)
        if text is not None:
            data[key] = text
        else:
            binary[key] = base64.b64encode(raw).decode("ascii")
    meta: dict[str, Any] = {"name": configmap_name(job), "labels": {**MANAGED_BY, "distcomp.dev/job": job}}
    if namespace:
        meta["namespace"] = namespace
    obj: dict[str, Any] = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "immutable": True}
    if data:
        obj["data"] = data
    if binary:
        obj["binaryData"] = binary
    return obj


def _keys(files: Mapping[str, Path]) -> list[str]:
    """A ConfigMap key per file, in sorted path order: unique (numbered), ``[-._a-zA-Z0-9]``."""
    return [f"{i:04d}-{_KEY.sub('_', rel)[-200:]}" for i, rel in enumerate(sorted(files))]


def _volume(plan: CodePlan, job: str) -> dict[str, Any]:
    if plan.mode == "configmap":
        items = [{"key": key, "path": rel, "mode": 0o755 if path.stat().st_mode & 0o100 else 0o644}
                 for key, (rel, path) in zip(_keys(plan.files), sorted(plan.files.items()))]
        return {"name": VOLUME, "configMap": {"name": configmap_name(job), "items": items}}
    return {"name": VOLUME, "emptyDir": {}}


CREDENTIALS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")


def store_env(plan: CodePlan, source: bool = False, secret: bool = True) -> list[dict[str, Any]]:
    """The env a container needs to reach the store: its endpoint and region; ``secret``: each
    credential from the user's Secret (never in clear in the manifest); ``source``: the store
    client's text as DISTCOMP_PODSTORE (run with ``python -c "$DISTCOMP_PODSTORE"``)."""
    env: list[dict[str, Any]] = []
    if source:
        from ...delivery.store import SOURCE

        env.append({"name": "DISTCOMP_PODSTORE", "value": SOURCE.replace("$", "$$")})  # the kubelet expands $(..)
    if plan.endpoint:
        env.append({"name": "AWS_ENDPOINT_URL", "value": plan.endpoint})
    if plan.region:
        env.append({"name": "AWS_REGION", "value": plan.region})
    if secret and plan.secret:
        env += [{"name": name, "valueFrom": {"secretKeyRef": {"name": plan.secret, "key": name,
                                                              "optional": name == "AWS_SESSION_TOKEN"}}}
                for name in CREDENTIALS]
    return env


def add_env(container: dict[str, Any], env: Sequence[Mapping[str, Any]]) -> None:
    """Add ``env`` to ``container``'s, each name once (what is there already stays)."""
    current = container.setdefault("env", [])
    known = {e.get("name") for e in current}
    current += [dict(e) for e in env if e["name"] not in known]


def fetch_argv(plan: CodePlan) -> list[str]:
    """The init container's command: fetch the archive, check its sha256, unpack it into CODE_DIR."""
    return escape(plan.fetch_argv(CODE_DIR))


def fetch_container(plan: CodePlan, image: str) -> dict[str, Any]:
    c: dict[str, Any] = {"name": FETCH_CONTAINER, "image": image, "command": fetch_argv(plan),
                         "volumeMounts": [{"name": VOLUME, "mountPath": CODE_DIR}]}
    env = store_env(plan, secret=False)
    if env:
        c["env"] = env
    if plan.secret:  # the credentials stay in the cluster's Secret: never in the manifest
        c["envFrom"] = [{"secretRef": {"name": plan.secret}}]
    return c


def install_prelude(packages: Sequence[str], ready: bool = False) -> str:
    """The shell line that installs ``packages`` before the command (``ready``: then marks the
    container ready, for an MPIJob worker's readiness probe)."""
    line = ("python -m pip install --quiet --no-cache-dir --disable-pip-version-check "
            + " ".join(shlex.quote(p) for p in packages))
    return f"{line} && touch {READY_FILE}" if ready else line


def wrap(command: Sequence[str], prelude: str) -> list[str]:
    """``command`` run after ``prelude`` by the shell, its argv passed on untouched (``$0 $@``):
    the words already escaped for Kubernetes stay as they were."""
    return [*SHELL, escape([f'{prelude} && exec "$0" "$@"'])[0], *command]


def apply(manifest: dict[str, Any], plan: CodePlan, image: str) -> dict[str, Any]:
    """Give every pod of ``manifest`` the code (a volume at CODE_DIR, its working folder; the
    init container that fetches it) and the packages (changed in place, and returned)."""
    from ._settings import replica_specs

    if plan.mode == "image" and not plan.packages:
        return manifest
    job = str(manifest["metadata"]["name"])
    if manifest.get("kind") == "TrainJob":
        return _apply_trainjob(manifest, plan, job)
    for replica_type, replica in replica_specs(manifest).items():
        pod = replica["template"]["spec"]
        main = pod["containers"][0]  # the builders put the training container first
        if plan.mode != "image":
            pod.setdefault("volumes", []).append(_volume(plan, job))
            main.setdefault("volumeMounts", []).append(
                {"name": VOLUME, "mountPath": CODE_DIR, **({"readOnly": True} if plan.mode == "configmap" else {})})
            main.setdefault("workingDir", CODE_DIR)
        if plan.mode == "store":
            pod.setdefault("initContainers", []).insert(0, fetch_container(plan, main.get("image") or image))
        if plan.packages:
            worker = manifest.get("kind") == "MPIJob" and replica_type == "Worker"
            main["command"] = wrap(main["command"], install_prelude(plan.packages, ready=worker))
            if worker:
                main["readinessProbe"] = {"exec": {"command": ["test", "-e", READY_FILE]}, "periodSeconds": 2}
    return manifest


def _apply_trainjob(manifest: dict[str, Any], plan: CodePlan, job: str) -> dict[str, Any]:
    """A TrainJob's runtime makes its pods, and ``runtimePatches`` may add volumes but no init
    container: the trainer's own command fetches the code (and installs the packages) first."""
    from ._trainjob import node_container, node_patch

    spec = manifest["spec"]
    trainer = spec["trainer"]
    steps: list[str] = []
    if plan.mode != "image":
        pod = node_patch(spec)
        pod.setdefault("volumes", []).append(_volume(plan, job))
        node_container(pod).setdefault("volumeMounts", []).append({"name": VOLUME, "mountPath": CODE_DIR})
    if plan.mode == "store":
        assert plan.store is not None
        fetch = (f'python -c "$DISTCOMP_PODSTORE" fetch {shlex.quote(plan.store.bucket)} {shlex.quote(plan.key)} '
                 f"{plan.digest} {CODE_DIR}")
        steps.append(fetch)
        add_env(trainer, store_env(plan, source=True))
    if plan.packages:
        steps.append(install_prelude(plan.packages))
    if plan.mode != "image":
        steps.append(f"cd {CODE_DIR}")
    trainer["command"] = wrap(trainer["command"], " && ".join(steps))
    return manifest
