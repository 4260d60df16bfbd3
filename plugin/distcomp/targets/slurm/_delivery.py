"""Slurm nodes that do not see the submitter's code folder: the code through an object store.

With ``--code-store s3://BUCKET/PREFIX`` submit uploads the code folder as the core's
content-addressed archive (``distcomp.delivery``) instead of copying it into the job folder, and
the job script's first step runs the core's stdlib fetcher once on every node, before the node
agents start: it downloads the archive, checks its sha256 and extracts it into a node-local
folder of the job's own (``NODE_DIR/JOB_FOLDER_NAME``, mode 700; ``--node-dir``, default
``/tmp/distcomp-USER``), the replicas' working folder. When the script ends, the cleanup that stops what the ranks left on each node
removes that folder too.

The store's credentials are secrets: they are in neither the script nor the record. Submit
writes the AWS_* credentials it used into ``store.sh`` (mode 600) in the job folder; the batch
step reads it on the first node into the fetch step's environment only, and Slurm hands that
environment to the step's task on every node. The endpoint and region are no secrets: they are
in the script.
"""

from __future__ import annotations

import getpass
import os
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

from ...errors import UsageError

if TYPE_CHECKING:
    from ...delivery.plan import Delivery
    from ...spec import ComponentSpec

FILE = "store.sh"  # the store's credentials in the job folder (mode 600)
CREDENTIALS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")
END = "DISTCOMP_FETCHER_END"


def plan(spec: "ComponentSpec", options: Mapping[str, Any], env: Mapping[str, str]) -> "Delivery | None":
    """The code's way through the store ``--code-store`` names (None: the job folder's copy)."""
    from ...delivery.code import code_files
    from ...delivery.plan import Delivery, in_store, store_settings
    from ...delivery.store import StoreURI

    given = options.get("code_store")
    if not given:
        if options.get("node_dir"):
            raise UsageError("--node-dir is where each node fetches the code from --code-store: give --code-store "
                             "too, or leave --node-dir out")
        return None
    root = options.get("node_dir")
    if root and not os.path.isabs(str(root)):
        raise UsageError(f"--node-dir {root}: a folder on each node, so an absolute path (e.g. /scratch/$USER)")
    store = StoreURI.parse(str(given))
    if not spec.code.is_dir():
        raise UsageError(f"--code-store {given}: {spec.ref}'s code folder {spec.code} does not exist on this "
                         "machine; give the spec's code: a folder that holds its code")
    endpoint, region = store_settings(env)
    return in_store(Delivery("shared", "", store=store, endpoint=endpoint, region=region), code_files(spec),
                    "--code-store given")


def node_folder(folder: Path, root: str | None = None) -> str:
    """The job's node-local code folder: the same path on every node, in ``root`` (``--node-dir``),
    else in the user's own folder of /tmp."""
    return f"{(root or f'/tmp/distcomp-{getpass.getuser()}').rstrip('/') or '/'}/{folder.name}"


def note(options: Mapping[str, Any], folder: Path) -> str:
    return (f"written for the job folder {folder}; `distcomp submit --target slurm` copies the spec there and "
            f"uploads the code to {options['code_store']} (not again when unchanged); each node fetches it into "
            f"{node_folder(folder, options.get('node_dir'))} before the job starts, with the credentials submit writes to {folder / FILE} "
            "(mode 600)")


def fetch_step(code: "Delivery", dest: str, python: str, nodes: int) -> str:
    """The batch script's lines that fetch the code on every node before the agents start."""
    from ...delivery.store import SOURCE

    if any(line == END for line in SOURCE.splitlines()):
        raise ValueError("the fetcher's text holds its own end marker")
    settings = "".join(f" {name}={shlex.quote(value)}" for name, value in (
        ("AWS_ENDPOINT_URL_S3", code.endpoint), ("AWS_REGION", code.region)) if value)
    argv = shlex.join(code.fetch_argv(dest, python, "fetch-into")[3:])
    return "\n".join([
        f"# the code: on every node, the stdlib fetcher downloads {code.store}'s sha256-{code.digest[:12]}..., checks",
        f"# its sha256 and extracts it into {dest}; the store's credentials come from {FILE} (mode 600)",
        f"IFS= read -r -d '' DISTCOMP_FETCHER <<'{END}' || true  # read to its end: no NUL byte", SOURCE.rstrip("\n"),
        END,
        f'( if [ -f "$DISTCOMP_JOB_FOLDER/{FILE}" ]; then set -a; . "$DISTCOMP_JOB_FOLDER/{FILE}"; set +a; fi',
        *([f"  export{settings}"] if settings else []),
        f"  exec srun --kill-on-bad-exit=1 --nodes={nodes} --ntasks={nodes} \\",
        f'    {shlex.quote(python)} -I -c "$DISTCOMP_FETCHER" {argv}',
        ') || { echo "distcomp: the code could not be fetched on every node" >&2; exit 1; }',
        "unset DISTCOMP_FETCHER",
    ])


def cleanup(dest: str) -> str:
    """What the per-node sweep runs first: the node-local code folder removed when it ends."""
    return f"trap {shlex.quote('rm -rf -- ' + shlex.quote(dest))} EXIT\n"


def ship(code: "Delivery", folder: Path, env: Mapping[str, str], notify: Any) -> None:
    """Before sbatch: the code up to the store (unless there already), the credentials submit
    used into ``folder/store.sh`` (mode 600, never readable by others)."""
    from ...delivery.transfer import upload

    upload(code, notify, env)
    found = {name: env[name] for name in CREDENTIALS if env.get(name)}
    if not found:
        return
    fd = os.open(folder / FILE, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.fchmod(fd, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write("# distcomp: the code store's credentials, read by the job's fetch step (mode 600)\n")
        f.write("".join(f"{name}={shlex.quote(value)}\n" for name, value in found.items()))
