"""The node agent's job record: one versioned JSON document that says everything a node needs
to start its part of a job. Standard library only, and nothing of distcomp outside this
package: the agent runs where only Python and the user's code exist. The writer side is
``distcomp.core.agentjob``.

A record (``VERSION`` 1)::

    {"distcomp_node_record": 1,
     "job": "slurm-test-torch-...",           # a name for messages
     "nodes": 2,
     "cwd": "code",                           # where replicas run (relative: to the job folder)
     "command": ["python", "train.py", ...],  # the rendered command: argv, or ["/bin/sh", "-c", LINE]
     "env": {"NAME": TEXT},                   # every replica's, over the agent's own environment
     "defaults": {"NAME": "VALUE"},           # only where neither the agent's env nor env sets NAME
     "replicas": [{"name": "rank0", "role": "worker", "index": 0, "node": 0, "rank": 0, "ranks": 1,
                   "service": false, "argv": ["{{command}}"], "env": {"NAME": "VALUE"},
                   "rank_prefix": "^\\[\\d+,(?P<rank>\\d+)\\]<stdout>: ?"}],   # optional: a line
                                            # it matches goes to logs/rankN.log, its tag removed
                   # optional, "rank_hooks": ["PRTE_MCA_odls_base_exec_agent"]: the variables through
                   # which the replica (mpirun) starts each rank behind a program: the agent's rank
                   # watcher (rankwatch), whose reports in rank-exits/ end the job at once
     "files": {"hostfile": "{{node:0}} slots=1\n"},   # written into the job folder, bound
     "ports": ["master"],
     "values": {"job_id": "7", "restart": "0"},       # placeholder values known when it was written
     "bind_env": {"host:0": "DISTCOMP_HOST_0", "port:master": "DISTCOMP_PORT_MASTER"},
     "node_env": ["SLURM_NODEID"],            # the first one set says which node this is
     "node_name_env": ["SLURMD_NODENAME"],    # the node's name in reports (else the host name)
     "task_env": ["SLURM_PROCID"],            # the agent's own task: not given to a one-rank replica
     "secrets": "secrets.sh",                 # optional: DISTCOMP_SECRET_N=... lines (mode 600), a file
                                              # of the record's own folder
     "console": false,                        # also print each line, [name]-prefixed, on stdout
     "grace": 5.0,                            # seconds between SIGTERM and SIGKILL
     "zero_or_greater": false}                # a negative exit code only is a failure

A TEXT is a string, or a list of pieces: strings, and integers that stand for the secret of that
index in the secrets file (so the record holds none in clear). Placeholders (``{{host:0}}``,
``{{port:master}}``, ``{{node:1}}``, ``{{job_dir}}``, ``{{job_id}}``, ``{{restart}}``,
``{{max_restarts}}``) are bound in a replica's argv and env and in the files, never in the
command or the job's env (those hold the user's values, which are never interpreted).
"""

from __future__ import annotations

import json
import re
import shlex
from typing import Any, Mapping, Sequence

from .shared import COMMAND as COMMAND, PLACEHOLDER as PLACEHOLDER
from .shared import bind as _bind
from .trust import Untrusted, read_trusted

VERSION = 1
KEY = "distcomp_node_record"
SECRET_VAR = "DISTCOMP_SECRET_"
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\Z")
_FILE = re.compile(r"^[A-Za-z0-9_.-]+\Z")
_REPLICA = re.compile(r"^[a-z][a-z0-9_-]*\Z")


class RecordError(Exception):
    """A record that cannot be used: what, and what to do."""


def bind(text: str, values: Mapping[str, str]) -> str:
    """``text`` with each placeholder replaced from ``values`` (keys ``host:0``, ``job_dir``...)."""
    return _bind(text, values, RecordError)


def text(value: Any, secrets: Sequence[str]) -> str:
    """A TEXT of the record as the process gets it: pieces joined, each secret index its value."""
    if isinstance(value, str):
        return value
    out = []
    for piece in value:
        if isinstance(piece, int) and not isinstance(piece, bool):
            if not 0 <= piece < len(secrets):
                raise RecordError(f"secret {piece} is not in the job's secrets file ({len(secrets)} secrets)")
            out.append(secrets[piece])
        else:
            out.append(piece)
    return "".join(out)


def read_secrets(content: str) -> list[str]:
    """The secrets of a ``DISTCOMP_SECRET_N=...`` file (shell-quoted values), in index order."""
    found: dict[int, str] = {}
    for word in shlex.split(content, comments=True, posix=True):
        name, _eq, value = word.partition("=")
        if name.startswith(SECRET_VAR) and name[len(SECRET_VAR):].isdigit():
            found[int(name[len(SECRET_VAR):])] = value
    return [found[i] for i in sorted(found)]


def _is_text(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, list) and all(
        isinstance(p, str) or (isinstance(p, int) and not isinstance(p, bool)) for p in value))


def check(data: Any, where: str) -> dict[str, Any]:
    """``data`` as a record of this version, or a RecordError saying what is wrong and what to do."""
    if not isinstance(data, dict) or KEY not in data:
        raise RecordError(f"{where}: not a distcomp node record (no {KEY!r} field)")
    version = data[KEY]
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise RecordError(f"{where}: {KEY} {version!r} is not a record version")
    if version > VERSION:
        raise RecordError(f"{where}: record version {version} is newer than this agent reads (up to {VERSION}); "
                          "run the job with the distcomp it was made with, or upgrade distcomp where the job runs")

    def bad(what: str) -> RecordError:
        return RecordError(f"{where}: {what}")

    if not isinstance(data.get("nodes"), int) or data["nodes"] < 1:
        raise bad("'nodes' must be a number >= 1")
    command = data.get("command")
    if not isinstance(command, list) or not command or not all(_is_text(w) for w in command):
        raise bad("'command' must be a non-empty list of words")
    for field in ("env", "defaults", "files", "values", "bind_env"):
        value = data.setdefault(field, {})
        if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
            raise bad(f"{field!r} must be a mapping")
    for k, v in data["env"].items():
        if not _ENV_NAME.match(k) or not _is_text(v):
            raise bad(f"env {k!r}: expected a variable name and a text")
    for field in ("defaults", "values", "bind_env"):
        if not all(isinstance(v, str) for v in data[field].values()):
            raise bad(f"{field!r}: every value must be a string")
    for name, content in data["files"].items():
        if not _FILE.match(name) or name in (".", "..") or not isinstance(content, str):
            raise bad(f"file {name!r}: expected a plain file name and its text")
    for field in ("node_env", "node_name_env", "task_env", "ports"):
        value = data.setdefault(field, [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise bad(f"{field!r} must be a list of names")
    replicas = data.get("replicas")
    if not isinstance(replicas, list) or not replicas:
        raise bad("'replicas' must be a non-empty list")
    names = set()
    for r in replicas:
        if not isinstance(r, dict) or not isinstance(r.get("name"), str) or not _REPLICA.match(r["name"]):
            raise bad(f"replica {r!r}: needs a 'name' of lowercase letters, digits, '_' or '-'")
        if r["name"] in names:
            raise bad(f"two replicas are named {r['name']!r}")
        names.add(r["name"])
        if not isinstance(r.get("node"), int) or not 0 <= r["node"] < data["nodes"]:
            raise bad(f"replica {r['name']}: 'node' must be a node index below {data['nodes']}")
        argv = r.get("argv")
        if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv) or argv.count(COMMAND) != 1:
            raise bad(f"replica {r['name']}: 'argv' must be a list of strings holding {COMMAND} once")
        env = r.setdefault("env", {})
        if not isinstance(env, dict) or not all(_ENV_NAME.match(k) and isinstance(v, str) for k, v in env.items()):
            raise bad(f"replica {r['name']}: 'env' must map variable names to strings")
        r.setdefault("service", False)
        prefix = r.get("rank_prefix")
        if prefix is not None:
            try:
                ok = isinstance(prefix, str) and "rank" in re.compile(prefix.encode("ascii")).groupindex
            except (re.error, UnicodeEncodeError):
                ok = False
            if not ok:
                raise bad(f"replica {r['name']}: 'rank_prefix' must be an ASCII regular expression with a group 'rank'")
        hooks = r.setdefault("rank_hooks", [])
        if not isinstance(hooks, list) or not all(isinstance(h, str) and _ENV_NAME.match(h) for h in hooks):
            raise bad(f"replica {r['name']}: 'rank_hooks' must be a list of variable names")
    if not isinstance(data.setdefault("cwd", "."), str):
        raise bad("'cwd' must be a path")
    secrets = data.setdefault("secrets", None)
    if secrets is not None and (not isinstance(secrets, str) or not _FILE.match(secrets) or secrets in (".", "..")):
        raise bad(f"'secrets' must be the name of a file in the record's own folder, or null (got {secrets!r})")
    grace = data.setdefault("grace", 5.0)
    if not isinstance(grace, (int, float)) or isinstance(grace, bool) or grace < 0:
        raise bad("'grace' must be a number of seconds >= 0")
    return data


def read(path: str) -> dict[str, Any]:
    """The record in file ``path``, checked (a RecordError says what is wrong and what to do),
    if it may be trusted (``.trust``: yours or root's, writable by you alone)."""
    try:
        data = json.loads(read_trusted(path, "the job record"))
    except Untrusted as exc:
        raise RecordError(str(exc)) from None
    except OSError as exc:
        raise RecordError(f"cannot read the job record {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise RecordError(f"{path} is not JSON ({exc}); give the job record distcomp wrote") from None
    return check(data, path)
