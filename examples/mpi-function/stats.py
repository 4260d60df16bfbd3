"""The numbers of the MPI example: a sibling module of ``train.py``, so it travels with the
function to every rank (distcomp ships the whole folder)."""

from __future__ import annotations


def share(count: int, rank: int, size: int) -> range:
    """The integers 1..count that this rank sums: every size-th one, from rank + 1."""
    return range(rank + 1, count + 1, size)


def expected(count: int) -> int:
    return count * (count + 1) // 2
