"""The kubelet's volumes, Secrets and init containers, emulated on this machine.

``_operator`` makes the pods and runs their commands; this module gives those pods what the
kubelet gives a container before it starts:

- env from Secrets: each ``valueFrom.secretKeyRef`` and ``envFrom.secretRef`` resolved from the
  Secret objects a test supplies (as the kubelet reads them from the API server); a missing
  required key fails, as the container would not start;
- volumes: a configMap volume is written out as its ``items`` lay it out (the key's text or
  base64 bytes, each item's mode), read-only; an emptyDir is an empty folder per pod; a
  persistentVolumeClaim is one folder per claim, shared by every pod that mounts it. The pods
  run in this machine's one mount namespace, so each mount path is replaced, in the
  container's command, env and working folder, by the folder standing for it (a chroot
  without root);
- init containers run one after another, to completion, before the main container.

``/dev/shm`` stays this machine's (it exists here).
"""

from __future__ import annotations

import base64
import re
import stat
from dataclasses import replace
from pathlib import Path
from typing import Any, Mapping, Sequence

from ._operator import Pod, _items, run_pods

HOST_PATHS = ("/dev/shm",)


def resolve_secrets(manifest: Mapping[str, Any], secrets: Mapping[str, Mapping[str, str]]) -> dict[str, Any]:
    """``manifest`` with every container's secret env made literal (``secrets``: name -> data)."""
    import copy

    out = copy.deepcopy(dict(manifest))

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for key in ("containers", "initContainers"):
                for c in node.get(key) or []:
                    _resolve(c, secrets)
            if "trainer" in node and isinstance(node["trainer"], dict):
                _resolve(node["trainer"], secrets)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(out)
    return out


def _resolve(container: dict[str, Any], secrets: Mapping[str, Mapping[str, str]]) -> None:
    env: list[dict[str, Any]] = []
    for source in container.pop("envFrom", None) or []:
        name = source["secretRef"]["name"]
        assert name in secrets, f"envFrom: no Secret {name!r}: the container would not start"
        env += [{"name": k, "value": v.replace("$", "$$")} for k, v in secrets[name].items()]
    for var in container.get("env") or []:
        ref = (var.get("valueFrom") or {}).get("secretKeyRef")
        if ref is None:
            env.append(var)
            continue
        data = secrets.get(ref["name"], {})
        if ref["key"] not in data:
            assert ref.get("optional"), f"env {var['name']}: Secret {ref['name']} has no key {ref['key']}"
            continue
        # the kubelet expands a literal value, never one from a Secret: escaped, it stays as stored
        env.append({"name": var["name"], "value": data[ref["key"]].replace("$", "$$")})
    if env:
        container["env"] = env


def pod_spec(manifest: Mapping[str, Any], replica_type: str) -> Mapping[str, Any]:
    specs = next(v for k, v in manifest["spec"].items() if k.endswith("ReplicaSpecs"))
    result: Mapping[str, Any] = specs[replica_type]["template"]["spec"]
    return result


def _write_configmap(volume: Mapping[str, Any], configmaps: Mapping[str, Mapping[str, Any]], folder: Path) -> None:
    source = volume["configMap"]
    cm = configmaps[source["name"]]
    data, binary = cm.get("data") or {}, cm.get("binaryData") or {}
    items = source.get("items") or [{"key": k, "path": k} for k in [*data, *binary]]
    for item in items:
        target = folder / item["path"]
        assert ".." not in Path(item["path"]).parts and not item["path"].startswith("/"), item["path"]
        target.parent.mkdir(parents=True, exist_ok=True)
        key = item["key"]
        assert key in data or key in binary, f"ConfigMap {source['name']} has no key {key}"
        target.write_bytes(data[key].encode() if key in data else base64.b64decode(binary[key]))
        target.chmod(int(item.get("mode", source.get("defaultMode", 0o644))))
    for path in sorted(folder.rglob("*"), reverse=True):  # mounted read-only
        if path.is_dir():
            path.chmod(0o555)


def mounts(pod: Pod, spec: Mapping[str, Any], container: Mapping[str, Any], root: Path,
           configmaps: Mapping[str, Mapping[str, Any]]) -> dict[str, Path]:
    """Each mount path of ``container`` -> the folder standing for it (made and filled here)."""
    volumes = {v["name"]: v for v in spec.get("volumes") or []}
    found: dict[str, Path] = {}
    for mount in container.get("volumeMounts") or []:
        if mount["mountPath"] in HOST_PATHS:
            continue
        volume = volumes[mount["name"]]
        if "persistentVolumeClaim" in volume:
            folder = root / "pvc" / volume["persistentVolumeClaim"]["claimName"]
        else:
            folder = root / "pods" / pod.name / mount["name"]
        if not folder.exists():
            folder.mkdir(parents=True)
            if "configMap" in volume:
                _write_configmap(volume, configmaps, folder)
        found[mount["mountPath"]] = folder
    return found


def rewrite(text: str, table: Mapping[str, Path]) -> str:
    """``text`` with each mount path (as a whole path prefix) replaced by its folder."""
    for mount in sorted(table, key=len, reverse=True):
        text = re.sub(rf"(?<![\w.-]){re.escape(mount)}(?=/|\b|$)", str(table[mount]), text)
    return text


def mounted(pod: Pod, table: Mapping[str, Path]) -> Pod:
    return replace(pod, command=tuple(rewrite(w, table) for w in pod.command),
                   env_items=tuple((n, rewrite(v, table)) for n, v in pod.env_items),
                   workdir=rewrite(pod.workdir, table) if pod.workdir else None)


def prepare(manifest: Mapping[str, Any], pods: Sequence[Pod], root: Path,
            configmaps: Mapping[str, Mapping[str, Any]], extra_env: Mapping[str, str]) -> tuple[list[Pod], list[Pod]]:
    """The init containers (as pods, in order) and the main containers of ``pods``, their
    volumes made and their paths rewritten; ``extra_env``: the image's (PATH)."""
    inits: list[Pod] = []
    mains: list[Pod] = []
    for pod in pods:
        spec = pod_spec(manifest, pod.replica_type)
        main = spec["containers"][0]
        table = mounts(pod, spec, main, root, configmaps)
        mains.append(replace(mounted(pod, table), extra_env={**pod.extra_env, **extra_env}))
        for i, init in enumerate(spec.get("initContainers") or []):
            init_table = mounts(pod, spec, init, root, configmaps)
            inits.append(mounted(Pod(f"{pod.name}-init-{i}", pod.replica_type, pod.index, tuple(init["command"]),
                                     tuple(_items(init)), init.get("workingDir"), dict(extra_env)), init_table))
    return inits, mains


def run_inits(inits: Sequence[Pod], cwd: Path, logs: Path, timeout: float = 120) -> None:
    """Each init container to completion, in order; one failing fails the test with its log."""
    for init in inits:
        done = run_pods([init], cwd, logs, timeout)
        assert done.codes[init.name] == 0, done.explain()


def writable(folder: Path) -> None:
    """Make a read-only emulated ConfigMap folder removable again (pytest's tmp_path cleanup)."""
    for path in [folder, *folder.rglob("*")]:
        if path.is_dir():
            path.chmod(path.stat().st_mode | stat.S_IWUSR)



