"""A spec's parse from ``distcomp.base.yamlcache`` where this very text parsed before (without
a problem: a problem is always reported by the real parse), so that loading an unchanged spec
imports no PyYAML."""

from __future__ import annotations

import os

from ..base import yamlcache
from ._diagnostics import Diagnostic
from ._located import Located

__all__ = ["parse"]

_PARSER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_source.py")  # what makes the answer


def parse(text: str, file: str) -> tuple[Located, list[Diagnostic]]:
    """``_source.parse(text, file)``, from the cache where this text parsed before."""
    content = text.encode("utf-8", "surrogatepass")  # a lone surrogate: a problem the parse reports
    key = yamlcache.key(_PARSER)
    found = yamlcache.get("parse", content, key)
    if found is not yamlcache.MISS:
        try:
            data, values, keys = found
        except (TypeError, ValueError):  # not what this module keeps
            pass
        else:
            if isinstance(values, dict) and isinstance(keys, dict):
                return Located(file, data, values, keys), []
    from ._source import parse as parse_yaml  # PyYAML: only for a text not seen before

    doc, problems = parse_yaml(text, file)
    if not problems:
        yamlcache.put("parse", content, key, (doc.data, doc.values, doc.keys))
    return doc, problems
