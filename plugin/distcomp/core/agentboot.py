"""The node agent carried inside one command line, for a platform where nothing of distcomp is
installed and no folder is shared with the submitter (a Kubernetes pod, an Azure ML instance).

``boot_argv(record)`` is ``python3 -c BOOT AGENT RECORD``: AGENT is the agent's own files (a
zip, base64), RECORD the node record as JSON. BOOT unpacks the agent into a fresh temporary
folder (beside an empty ``distcomp`` package, so an image that has another distcomp, or none,
runs this one), writes the record there (mode 600 whatever the image's umask: the agent refuses
a record others may write) with the container's working folder as the replicas' ``cwd``, and
runs ``python -m distcomp.agent`` on it. The image needs Python 3 and nothing else.

Where the platform itself fills the command in (Azure ML substitutes ``${{inputs.x}}`` in the
text it runs in bash), ``boot_line`` gives a shell line whose command comes on stdin, from a
quoted heredoc: the platform's substitution happens, the shell's does not, and each replica's
bash runs the line as the platform would have.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import io
import json
import shlex
import zipfile
from pathlib import Path
from typing import Any, Mapping

__all__ = ["BOOT", "agent_payload", "boot_argv", "boot_line"]

AGENT = Path(__file__).parent.parent / "agent"
# kept to one line of plain statements: it is read in `kubectl describe` and Azure ML's UI
BOOT = ("import base64,io,json,os,runpy,sys,tempfile,zipfile;"
        "d=tempfile.mkdtemp(prefix='distcomp-node-');"
        "zipfile.ZipFile(io.BytesIO(base64.b64decode(sys.argv[1]))).extractall(d);"
        "r=json.loads(sys.argv[2]);r['cwd']=os.getcwd();"
        "r['command']=['/bin/bash','-c',sys.stdin.read()] if sys.argv[3:]==['-'] else r['command'];"
        "p=os.path.join(d,'node.json');f=os.fdopen(os.open(p,os.O_WRONLY|os.O_CREAT|os.O_EXCL,0o600),'w');"
        "json.dump(r,f);f.close();"
        "sys.path.insert(0,d);sys.argv=['distcomp.agent',p];"
        "runpy.run_module('distcomp.agent',run_name='__main__',alter_sys=True)")


@functools.cache
def agent_payload() -> str:
    """The agent's files as a base64 zip: ``distcomp/__init__.py`` (empty) and ``distcomp/agent/**.py``
    (its rank watcher's ``_ranksite`` too).
    Made reproducibly (fixed times, sorted names), so one distcomp always compiles the same text."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as z:
        files = [("distcomp/__init__.py", b"")]
        files += [(f"distcomp/agent/{p.relative_to(AGENT).as_posix()}", p.read_bytes())
                  for p in sorted(AGENT.rglob("*.py")) if "__pycache__" not in p.parts]
        for name, data in files:
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def boot_argv(record: Mapping[str, Any], python: str = "python3") -> list[str]:
    """The argv that runs the agent on ``record`` wherever ``python`` is."""
    return [python, "-c", BOOT, agent_payload(), json.dumps(record, separators=(",", ":"), sort_keys=True)]


def boot_line(record: Mapping[str, Any], command: str, python: str = "python3") -> str:
    """A shell line that runs the agent on ``record`` with ``command`` (a shell line the platform
    completes) as every replica's command, read from a quoted heredoc. Its end marker carries a
    hash of the command, so the command's own lines cannot end it."""
    end = "DISTCOMP_COMMAND_" + hashlib.sha256(command.encode()).hexdigest()[:16]
    return f"{shlex.join(boot_argv(record, python))} - <<'{end}'\n{command.rstrip()}\n{end}"
