"""One rule for what is secret and how it is masked, used wherever text leaves a job: the
console, the rank logs (the ``=== attempt`` header included), ``status.json`` and
``outcome.json``, MLflow params and tags, compiled artefacts (the sbatch script).

A name is secret when it contains one of the words below, in any case (``api_key``,
``DB_PASSWORD``, ``authToken``, ``aws_credentials``). Over-masking is the safe error: a
``monkey`` input is masked too.

>>> is_secret("db_password"), is_secret("epochs")
(True, False)

A job's ``Masker`` is built once from its inputs and its environment variables (the spec's and
``--env``): the values of the secret-named ones are its secrets. Each secret is masked as
``***`` in every text, with the forms it takes on the way out:

- a value of 3 characters or more wherever it occurs, even inside a word:

>>> m = Masker.of({"password": "hunter2", "epochs": 3}, env={"API_TOKEN": "tok-123", "HOME": "/root"})
>>> m.text("--password hunter2 --epochs 3 token=tok-123 home=/root")
'--password *** --epochs 3 token=*** home=/root'

- a value of 1 or 2 characters only where it stands as a word of its own (after a space, a
  ``=`` or a quote, before a space or a quote): an argv word, ``--pw=ab``, ``'ab'`` in a
  Python list; masking it everywhere would blank every ``ab`` in ``about``:

>>> m = Masker.of({"passwd": "ab"})
>>> m.argv(["--pw", "ab", "--pw=ab", "about", "lab"])
['--pw', '***', '--pw=***', 'about', 'lab']
>>> m.text("argv ['--pw', 'ab'] is about a lab")
"argv ['--pw', '***'] is about a lab"

- a multi-line value (a PEM key, JSON credentials) whole, and each of its lines on its own,
  since logs and consoles split lines; a line is masked by the two rules above, stripped of
  the spaces around it (it may be re-indented), and a line with no letter or digit (``{``,
  ``}``, ``-----``) is not masked on its own: it holds nothing of the secret, and masking it
  would blank every brace of the logs:

>>> m = Masker.of({"key": "-----BEGIN KEY-----\\nMIIEabc\\nq1\\n}"})
>>> m.text("got -----BEGIN KEY-----\\nMIIEabc\\nq1\\n} and {}")
'got *** and {}'
>>> [m.text(line) for line in ["-----BEGIN KEY-----", "  MIIEabc", "q1", "}"]]
['***', '  ***', '***', '}']

- a value as Python's ``repr`` and JSON write it (a rank printing its ``sys.argv``, a JSON
  log line), and as the shell quotes it when it holds a quote (a ``sh -c`` command line):

>>> argv = ["--pw", "pass\\nword"]
>>> Masker.of({"passwd": argv[1]}).text(f"argv {argv}")
"argv ['--pw', '***']"

>>> import shlex
>>> Masker.of({"passwd": "it's"}).text("x --pw " + shlex.quote("it's"))
'x --pw ***'

What stays in clear: a secret a rank transforms before printing it (base64, reversed, cut
in pieces of 1-2 characters inside words), and environment variables a rank inherits from the
submitting shell (only the inputs and the job's own variables are the job's secrets), except in
what the rank logs to MLflow itself: there the values of all its own secret-named variables
are masked (``env_secrets``; ``distcomp.runtime``, MLflow's API through the hook).
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, Mapping, Sequence

# the rule that turns needles into one pattern is shared with the stdlib-only node agent
from ..agent.shared import REDACTED as REDACTED, mask_pattern

__all__ = ["REDACTED", "SECRET_NAME", "Masker", "NONE", "env_secrets", "is_secret", "job_masker", "secret_values"]

SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|PWD|AUTH|CRED|PRIVATE", re.IGNORECASE)


def is_secret(name: str) -> bool:
    """True when a value under ``name`` must never be written in clear."""
    return SECRET_NAME.search(name) is not None


def _escaped(text: str) -> Iterator[str]:
    """``text``, and as Python's repr and JSON write it inside their quotes."""
    yield text
    yield repr(text)[1:-1]
    yield json.dumps(text)[1:-1]
    yield json.dumps(text, ensure_ascii=False)[1:-1]


def _forms(value: str) -> Iterator[str]:
    """The texts that stand for ``value`` on the way out (see the module's doc)."""
    if value.strip():
        yield from _escaped(value)
        if "'" in value:  # otherwise the value stands in its quoted form as it is
            yield shlex.quote(value)
    if "\n" in value or "\r" in value or value != value.strip():
        for line in value.splitlines():
            line = line.strip()
            if any(c.isalnum() for c in line):
                yield from _escaped(line)


@dataclass(frozen=True)
class Masker:
    """The texts a job masks (``needles``, longest first), and the one pattern that finds them.

    Built once per job (``Masker.of``); a process that did not build it (``distcomp status`` of
    a Slurm job) gets the same one back from its needles (``Masker(needles)``)."""

    needles: tuple[str, ...] = ()
    _pattern: "re.Pattern[str] | None" = field(default=None, init=False, repr=False, compare=False)
    _raw: tuple[bytes, ...] = field(default=(), init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        needles, pattern = mask_pattern(self.needles)
        object.__setattr__(self, "needles", needles)
        object.__setattr__(self, "_pattern", pattern)
        object.__setattr__(self, "_raw", tuple(n.encode("utf-8", "surrogateescape") for n in needles))

    @classmethod
    def of(cls, values: Mapping[str, Any], env: Mapping[str, Any] | None = None) -> "Masker":
        """The masker of a job with these inputs and environment variables (the spec's, ``--env``)."""
        return cls.of_secrets(secret_values(values) + secret_values(env or {}))

    @classmethod
    def of_secrets(cls, secrets: Iterable[str]) -> "Masker":
        """The masker of these secret values."""
        return cls(tuple(form for value in secrets for form in _forms(str(value))))

    def __bool__(self) -> bool:
        return bool(self.needles)

    def text(self, text: str) -> str:
        """``text`` with every secret masked."""
        if self._pattern is None:
            return text
        return self._pattern.sub(REDACTED, text)

    def argv(self, argv: Sequence[str]) -> list[str]:
        """A copy of ``argv`` safe to show: every secret masked inside every word."""
        return [self.text(word) for word in argv]

    def raw(self, data: bytes) -> bytes:
        """A line of a process's output, masked; other bytes stay as written."""
        if self._pattern is None or not any(n in data for n in self._raw):
            return data
        return self.text(data.decode("utf-8", "surrogateescape")).encode("utf-8", "surrogateescape")

    def data(self, value: Any) -> Any:
        """A JSON-like record with every string in it masked (its keys are names, kept)."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, Mapping):
            return {k: self.data(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self.data(v) for v in value]
        return value

    def pieces(self, text: str) -> list[tuple[str, bool]]:
        """``text`` cut into (piece, is a secret) in order: what a compiled artefact writes as a
        reference to the secret instead of the secret itself."""
        if self._pattern is None:
            return [(text, False)] if text else []
        out: list[tuple[str, bool]] = []
        at = 0
        for found in self._pattern.finditer(text):
            if found.start() > at:
                out.append((text[at:found.start()], False))
            out.append((found.group(), True))
            at = found.end()
        if at < len(text):
            out.append((text[at:], False))
        return out


NONE = Masker()


def job_masker(spec: Any, values: Mapping[str, Any], env: Mapping[str, Any] | None = None) -> Masker:
    """The masker of one job of ``spec``: its input values, the spec's environment variables and
    the ones given for the job (``--env``), the latter over the former."""
    return Masker.of(values, {**spec.environment_variables, **(env or {})})


def secret_values(values: Mapping[str, Any]) -> list[str]:
    """The values (as text) of the secret-named entries of ``values``, longest first."""
    found = {str(v) for k, v in values.items() if v is not None and is_secret(k) and str(v).strip()}
    return sorted(found, key=len, reverse=True)


# What a process's whole environment holds under a name the rule matches, and is no secret: the
# shell's folders, agents' sockets, a tokenizer library's switch. And values no secret takes (a
# flag): masked everywhere as words, they would blank every "true" and "1" a rank logs.
NOT_SECRET_ENV = frozenset({"PWD", "OLDPWD", "XAUTHORITY", "SSH_AUTH_SOCK", "GPG_AGENT_INFO",
                            "TOKENIZERS_PARALLELISM", "KRB5CCNAME"})
_FLAG_VALUES = frozenset({"0", "1", "true", "false", "yes", "no", "on", "off", "none", "null"})


def env_secrets(environ: Mapping[str, str]) -> list[str]:
    """The secrets of a process's own environment: the values of its secret-named variables
    (``secret_values``), less the names and flag values above. What a rank masks in what it
    logs: it holds these anyway, so nothing tells it a secret it did not have."""
    return secret_values({k: v for k, v in environ.items()
                          if k not in NOT_SECRET_ENV and v.strip().lower() not in _FLAG_VALUES})
