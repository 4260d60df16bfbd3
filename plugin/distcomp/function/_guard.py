"""Whether this process is a rank's runner importing the user's module: a ``distcomp.run(fn)``
at that module's top level (no ``if __name__ == "__main__":`` guard) would start a job from
every rank, each starting more; the API refuses it while the flag is up."""

from __future__ import annotations

from ..errors import UsageError

importing = False


def check(where: str) -> None:
    if importing:
        raise UsageError(f"{where}: a job started while a rank imports the component's module: put the "
                         "distcomp.run/submit/compile call under `if __name__ == \"__main__\":`")
