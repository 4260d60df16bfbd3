"""A Kubeflow job's secrets as a Kubernetes ``Secret``: the manifest holds none in clear.

The job's masker (``distcomp.base.redact``: the secret-named inputs and variables) gives the
needles; the Secret ``JOB-secrets`` holds each as ``DISTCOMP_SECRET_N`` (the index of the
Slurm script's ``secrets.sh``, ``targets._secrets``). In every container of the manifest:

- a variable whose whole value is one secret (``CLOUD_AUTH``) takes it through
  ``valueFrom.secretKeyRef``;
- a secret inside a command word, or inside another variable's value, becomes
  ``$(DISTCOMP_SECRET_N)``: the container gets that variable from the Secret first, and the
  kubelet expands the reference before the container starts, so the word the program gets is
  the one the spec rendered (a shell line, the agent's JSON record: the needle is the text as it
  stands there, quoted or escaped). Command words are already ``$``-escaped (``_pod.escape``),
  so a needle is looked for in its escaped form there.

Any builder's manifest (a plugin's kind too) goes through this after it is built, so no kind
needs to know about secrets.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Mapping

from ...base.files import write_atomic
from ...errors import UsageError
from ...base.redact import REDACTED, Masker
from .._secrets import VAR

__all__ = ["SUFFIX", "apply", "masked_text", "secret_file", "secret_name", "secret_notes", "write_secret", "writer"]

SUFFIX = ".secret.yaml"
HEADER = "# distcomp: the Secret of a compiled Kubeflow job (mode 600: only its owner reads it)\n"


def secret_name(job: str) -> str:
    return f"{job}-secrets"  # a job name is <= 40 characters: a valid Secret name


def _escaped(needle: str) -> str:
    return needle.replace("$", "$$")


def _ref(index: int) -> str:
    return f"$({VAR}{index})"


def _rewrite(text: str, masker: Masker, index: Mapping[str, int], used: set[int]) -> str:
    """``text`` with each secret in it a ``$(DISTCOMP_SECRET_N)`` reference (``masker``'s
    needles as they stand in ``text``: ``index`` maps each to N)."""
    out = []
    for piece, secret in masker.pieces(text):
        if secret:
            used.add(index[piece])
            out.append(_ref(index[piece]))
        else:
            out.append(piece)
    return "".join(out)


def _container(c: dict[str, Any], name: str, masker: Masker, words: Masker,
               index: Mapping[str, int], escaped: Mapping[str, int]) -> None:
    used: set[int] = set()
    for key in ("command", "args"):
        if isinstance(c.get(key), list):
            c[key] = [_rewrite(w, words, escaped, used) if isinstance(w, str) else w for w in c[key]]
    env: list[Any] = []
    for var in c.get("env") or []:
        value = var.get("value") if isinstance(var, dict) else None
        if not isinstance(value, str) or not masker:
            env.append(var)
            continue
        pieces = masker.pieces(value)
        if len(pieces) == 1 and pieces[0][1]:  # the whole value is one secret: straight from the Secret
            env.append({"name": var["name"], "valueFrom": {"secretKeyRef": {"name": name,
                                                                            "key": f"{VAR}{index[value]}"}}})
        else:
            env.append({**var, "value": _rewrite(value, masker, index, used)})
    if used:  # first: a reference expands only against the variables before it
        env = [{"name": f"{VAR}{i}", "valueFrom": {"secretKeyRef": {"name": name, "key": f"{VAR}{i}"}}}
               for i in sorted(used)] + env
    if env:
        c["env"] = env


def _walk(node: Any, visit: Callable[[dict[str, Any]], None]) -> None:
    if isinstance(node, dict):
        if any(isinstance(node.get(k), list) for k in ("command", "args", "env")):
            visit(node)  # a container, or a TrainJob's trainer
        for key, value in node.items():
            if key != "metadata":
                _walk(value, visit)
    elif isinstance(node, list):
        for value in node:
            _walk(value, visit)


def apply(manifest: dict[str, Any], masker: Masker) -> dict[str, Any] | None:
    """Move ``masker``'s secrets out of ``manifest`` (in place) into references to the Secret;
    the Secret (a manifest), or None when the job has no secret."""
    if not masker:
        return None
    meta = manifest["metadata"]
    name = secret_name(meta["name"])
    index = {n: i for i, n in enumerate(masker.needles)}
    escaped = {_escaped(n): i for n, i in index.items()}
    words = Masker(tuple(escaped))
    _walk(manifest.get("spec"), lambda c: _container(c, name, masker, words, index, escaped))
    secret: dict[str, Any] = {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                              "metadata": {"name": name, "labels": {**dict(meta.get("labels") or {}),
                                                                    "distcomp.dev/job": meta["name"]}},
                              "stringData": {f"{VAR}{i}": n for n, i in index.items()}}
    if meta.get("namespace"):
        secret["metadata"]["namespace"] = meta["namespace"]
    return secret


def secret_file(out: Path) -> Path:
    """Where the Secret of a job written to ``out`` goes: beside it, ``STEM.secret.yaml``."""
    return out.with_name(out.name.rsplit(".", 1)[0] + SUFFIX if "." in out.name.lstrip(".") else out.name + SUFFIX)


def masked_text(secret: Mapping[str, Any]) -> str:
    """The Secret as YAML comments, each value ``***``: what may be shown."""
    import yaml

    shown = {**secret, "stringData": {k: REDACTED for k in secret["stringData"]}}
    return "".join(f"# {line}\n" for line in yaml.safe_dump(shown, sort_keys=False).splitlines())


def write_secret(path: Path, secret: Mapping[str, Any]) -> None:
    """The Secret to ``path``, mode 600 from its first byte; a file there that distcomp did not
    write as a Secret is refused, not replaced."""
    import yaml

    try:
        with open(path, encoding="utf-8") as f:
            first = f.readline()
    except FileNotFoundError:
        first = HEADER
    except OSError as exc:
        raise UsageError(f"cannot write the job's Secret to {path}: {exc.strerror or exc}") from None
    if first != HEADER:
        raise UsageError(f"{path} exists and is not a Secret distcomp wrote: the job's Secret goes there (beside the "
                         "job's file); move that file, or give --out another name")
    try:
        write_atomic(path, HEADER + yaml.safe_dump(dict(secret), sort_keys=False), mode=0o600)
    except OSError as exc:
        raise UsageError(f"cannot write the job's Secret to {path}: {exc.strerror or exc}") from None


def writer(text: str, secret: Mapping[str, Any]) -> Callable[[Path], None]:
    """What ``--out FILE`` does: the Secret beside FILE first (a foreign file there stops
    everything), then the job's objects to FILE, whole or not at all."""
    def write(out: Path) -> None:
        write_secret(secret_file(Path(out)), secret)
        try:
            write_atomic(Path(out), text)
        except OSError as exc:
            raise UsageError(f"cannot write {out}: {exc.strerror or exc}") from None
    return write


def secret_notes(secret: Mapping[str, Any]) -> tuple[str, ...]:
    name = secret["metadata"]["name"]
    return (f"the job takes its secret-named values from the Secret {name} (secretKeyRef): none is in the job's "
            "manifest",
            f"wrote the Secret {name} beside {{out}}: same name, {SUFFIX} for its last suffix (mode 600, never "
            "shown); apply it before the job (kubectl apply -f)")
