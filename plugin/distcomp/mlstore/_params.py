"""One rule for params on every store: send only what the run does not hold yet.

A param is immutable in MLflow, and MLflow refuses a whole batch when one of its params already
holds another value, so sending a known key again can cost the new params beside it. Each store
keeps what it knows a run holds (one ``run_data()`` read at first use, then what it sent) and
sends only new keys; a key that holds another value is reported by name and kept as it is.
A value over MLflow's limit is cut as MLflow cuts it (its first 6000 characters), and the run
says so in a tag per cut param (``fit``), where MLflow would only warn on the console.
"""

from __future__ import annotations

from typing import Callable, Mapping

from ..base.redact import REDACTED, is_secret
from ._records import MAX_KEY, MAX_PARAM_VALUE, truncate

Read = Callable[[str], Mapping[str, str]]  # run id -> the params the run holds now
TRUNCATED = "distcomp.truncated_param."  # + a param's name: its value was cut to MLflow's limit


def fit(tags: Mapping[str, str], params: Mapping[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """(tags, params) as every store writes them: each value over ``MAX_PARAM_VALUE`` (MLflow's
    ``MAX_PARAM_VAL_LENGTH``) cut to its first characters, as MLflow cuts it, and a tag
    ``distcomp.truncated_param.NAME`` with its full length, so the run shows it was cut."""
    cut = {k: len(v) for k, v in params.items() if len(v) > MAX_PARAM_VALUE}
    if not cut:
        return dict(tags), dict(params)
    notes = {truncate(TRUNCATED + k, MAX_KEY): f"{n} characters, over MLflow's limit: the param holds the first "
             f"{MAX_PARAM_VALUE}" for k, n in cut.items()}
    return {**tags, **notes}, {k: v[:MAX_PARAM_VALUE] for k, v in params.items()}


def conflict(run_id: str, key: str, old: str, new: str) -> str:
    if is_secret(key):  # the values of a secret-looking name are not shown
        old, new = REDACTED, REDACTED
    return f"param {key!r} is already {old!r} in run {run_id}; kept that, not {new!r}"


class KnownParams:
    """The params each run holds, as far as this process knows."""

    def __init__(self, read: Read) -> None:
        self._read = read
        self._runs: dict[str, dict[str, str]] = {}

    def created(self, run_id: str) -> None:
        """A run this process just made: it holds no params, no need to ask."""
        self._runs[run_id] = {}

    def split(self, run_id: str, params: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
        """(the params to send, a problem for each key that holds another value)."""
        if run_id not in self._runs:
            self._runs[run_id] = dict(self._read(run_id))
        have = self._runs[run_id]
        new = {k: v for k, v in params.items() if k not in have}
        return new, [conflict(run_id, k, have[k], v) for k, v in params.items() if k in have and have[k] != v]

    def sent(self, run_id: str, params: Mapping[str, str]) -> None:
        self._runs.setdefault(run_id, {}).update(params)

    def forget(self, run_id: str) -> None:
        """Another writer changed the run (a refused batch says so): read it again next time."""
        self._runs.pop(run_id, None)


def log_new(known: KnownParams, run_id: str, params: Mapping[str, str], size: int,
            send: Callable[[dict[str, str]], bool]) -> list[str]:
    """Send the run's new params in batches of ``size``; ``send`` returns False when the store
    refused a batch (a param holds another value: another writer got there first; or a value
    the store will not take). Then the run is read again and what is still new is sent once
    more, one by one if refused again, so one bad param costs no other. Returns the problems."""
    new, problems = known.split(run_id, params)
    items = list(new.items())
    for i in range(0, len(items), size):
        batch = dict(items[i:i + size])
        if send(batch):
            known.sent(run_id, batch)
            continue
        known.forget(run_id)
        again, more = known.split(run_id, batch)
        problems += more
        if not again or send(again):
            known.sent(run_id, again)
            continue
        for key, value in again.items():
            if send({key: value}):
                known.sent(run_id, {key: value})
            else:
                problems.append(f"param {key!r} of run {run_id} was refused by the store; the others were logged")
    return problems
