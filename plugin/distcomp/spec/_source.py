"""Read a YAML spec into plain Python values plus the position of every key and value.

PyYAML's composer gives nodes with marks; we construct the values ourselves so that
duplicate keys, non-string keys, alias cycles and alias bombs become located spec errors
instead of silent overwrites or exceptions.
"""

from __future__ import annotations

import sys
from typing import Any

import yaml

from ._diagnostics import Diagnostic, DocPath, dotted
from ._located import Located

try:  # libyaml is several times faster; fall back to the pure-Python loader
    _Base: type = yaml.CSafeLoader
except AttributeError:  # pragma: no cover - depends on the PyYAML build
    _Base = yaml.SafeLoader

MAX_NODES = 100_000  # an alias bomb expands past this long before it hurts
MAX_DEPTH = 64  # a spec nests ~6 deep; libyaml's composer recurses in C and crashes near 10,000


class _DocumentError(Exception):
    def __init__(self, line: int, col: int, path: DocPath, message: str, hint: str | None = None):
        super().__init__(message)
        self.line, self.col, self.path, self.message, self.hint = line, col, path, message, hint


def _pos(node: yaml.Node) -> tuple[int, int]:
    return node.start_mark.line + 1, node.start_mark.column + 1


class _Builder:
    def __init__(self, loader: Any, doc: Located) -> None:
        self.loader = loader
        self.doc = doc
        self.count = 0
        self.errors: list[_DocumentError] = []

    def build(self, node: yaml.Node, path: DocPath, active: frozenset[int]) -> Any:
        self.count += 1
        if self.count > MAX_NODES:
            raise _DocumentError(*_pos(node), path, f"document is too large (more than {MAX_NODES} nodes after expanding aliases)")
        self.doc.values.setdefault(path, _pos(node))
        if id(node) in active:
            raise _DocumentError(*_pos(node), path, "an alias refers to itself (recursive YAML)")
        if isinstance(node, yaml.ScalarNode):
            try:
                return self.loader.construct_object(node, deep=True)
            except Exception as exc:  # PyYAML's constructors raise anything: '!!int' alone is an IndexError
                tag = node.tag.rsplit(":", 1)[-1]
                del exc
                text = str(node.value)
                limit = sys.get_int_max_str_digits()
                if tag == "int" and limit and len(text) > limit:  # Python's limit on an int's digits
                    raise _DocumentError(*_pos(node), path, f"the integer has {len(text)} digits, over Python's "
                                         f"limit of {limit}", hint="quote it to make it a string") from None
                raise _DocumentError(*_pos(node), path, f"{text[:80] + '...' if len(text) > 80 else text!r} is not "
                                     f"a valid YAML {tag}", hint="fix the value, or quote it to make it a string") from None
        inner = active | {id(node)}
        if isinstance(node, yaml.SequenceNode):
            return [self.build(child, path + (i,), inner) for i, child in enumerate(node.value)]
        if isinstance(node, yaml.MappingNode):
            try:
                self.loader.flatten_mapping(node)  # resolves '<<' merge keys
            except yaml.YAMLError as exc:
                raise _DocumentError(*_pos(node), path, f"invalid merge key: {getattr(exc, 'problem', exc)}") from None
            out: dict[str, Any] = {}
            for key_node, value_node in node.value:
                if not isinstance(key_node, yaml.ScalarNode):
                    raise _DocumentError(*_pos(key_node), path, "a key must be a plain name, not a list or mapping")
                # keys stay as written: 'on', '1' or 'null' are names in a spec, not values
                key = key_node.value
                if key in out:
                    first = self.doc.keys[path + (key,)]
                    self.errors.append(_DocumentError(*_pos(key_node), path + (key,),
                                                      f"duplicate key '{key}' (first at line {first[0]})"))
                    continue
                self.doc.keys[path + (key,)] = _pos(key_node)
                out[key] = self.build(value_node, path + (key,), inner)
            return out
        raise _DocumentError(*_pos(node), path, f"unsupported YAML node {type(node).__name__}")


def _too_deep(text: str) -> yaml.Event | None:
    """The first event nested deeper than MAX_DEPTH, read from an iterative parser.

    libyaml is tried first (fast). Since PyYAML 6.0.4 its scanner has a nesting limit of its own
    (1000) that it can hit while looking ahead, before we see the event at depth MAX_DEPTH + 1;
    on any libyaml error the pure-Python parser, which has no such limit, says where the
    document first goes too deep. A real syntax error is reported by the parse that follows.
    """
    try:
        return _first_too_deep(_Base, text)
    except yaml.YAMLError:
        if _Base is yaml.SafeLoader:
            return None
        try:
            return _first_too_deep(yaml.SafeLoader, text)
        except yaml.YAMLError:
            return None


def _first_too_deep(loader_type: type, text: str) -> yaml.Event | None:
    loader, depth = loader_type(text), 0
    try:
        while loader.check_event():
            event = loader.get_event()
            if isinstance(event, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
                depth += 1
                if depth > MAX_DEPTH:
                    return event
            elif isinstance(event, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
                depth -= 1
        return None
    finally:
        loader.dispose()


def parse(text: str, file: str) -> tuple[Located, list[Diagnostic]]:
    """Parse ``text``; on failure the diagnostics say where and why, and data is None."""
    doc = Located(file)
    try:
        text.encode("utf-8")  # libyaml needs UTF-8; a str from check_text() may hold lone surrogates
    except UnicodeEncodeError as exc:
        return doc, [Diagnostic(file, 1, exc.start + 1, "<document>", f"the text is not valid Unicode ({exc.reason})")]
    loader = _Base(text)
    try:
        try:
            deep = _too_deep(text)
            if deep is not None and deep.start_mark is not None:
                m = deep.start_mark
                return doc, [Diagnostic(file, m.line + 1, m.column + 1, "<document>",
                                        f"the document is nested too deeply (more than {MAX_DEPTH} levels)")]
            node = loader.get_single_node()
        except yaml.MarkedYAMLError as exc:
            mark = exc.problem_mark or exc.context_mark
            line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
            problem = exc.problem or str(exc)
            return doc, [Diagnostic(file, line, col, "<document>", f"YAML syntax error: {problem}",
                                    hint="fix the YAML syntax at this position")]
        except yaml.YAMLError as exc:  # e.g. unacceptable characters in the reader
            return doc, [Diagnostic(file, 1, 1, "<document>", f"YAML error: {exc}")]
        if node is None:
            return doc, [Diagnostic(file, 1, 1, "<document>", "the file is empty",
                                    expected="a mapping with name, type, inputs, outputs, ...")]
        builder = _Builder(loader, doc)
        try:
            doc.data = builder.build(node, (), frozenset())
        except _DocumentError as exc:
            return doc, [Diagnostic(file, exc.line, exc.col, dotted(exc.path), exc.message, hint=exc.hint)]
        except RecursionError:
            return doc, [Diagnostic(file, 1, 1, "<document>", "the document is nested too deeply")]
        return doc, [Diagnostic(file, e.line, e.col, dotted(e.path), e.message) for e in builder.errors]
    finally:
        loader.dispose()
