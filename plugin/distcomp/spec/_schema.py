"""A tiny declarative schema language: one tree both checks a document and emits JSON Schema.

The validator and ``distcomp schema`` read the same tree, so the JSON Schema an editor uses
can never drift from what ``distcomp validate`` accepts (a test checks them against each
other with the real ``jsonschema`` library).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from ._diagnostics import DocPath, Problems, did_you_mean, one_of, show


def _ci_pattern(words: list[str]) -> str:
    """A case-insensitive ECMA-262 regex for ``words`` (JSON Schema has no (?i) flag)."""
    def one(word: str) -> str:
        return "".join(f"[{c.lower()}{c.upper()}]" if c.isalpha() else re.escape(c) for c in word)
    return "^(" + "|".join(one(w) for w in sorted(words)) + ")$"


class Node:
    """Base of every schema node."""

    description: str = ""

    def check(self, value: Any, path: DocPath, problems: Problems) -> bool:
        raise NotImplementedError

    def json(self) -> dict[str, Any]:
        raise NotImplementedError

    def accepts_type(self, value: Any) -> bool:
        """Cheap shape test used to pick a branch of a Union."""
        return True

    def _doc(self, out: dict[str, Any]) -> dict[str, Any]:
        if self.description:
            out["description"] = self.description
        return out


@dataclass(frozen=True)
class Str(Node):
    description: str = ""
    enum: tuple[str, ...] | None = None
    case_insensitive: bool = False
    pattern: str | None = None
    pattern_hint: str = ""
    what: str = "value"  # noun used in messages: "launcher", "input type", ...
    expected: str = ""  # overrides the generated "one of: ..." clause
    # what to write instead of a value that is no string (e.g. a mapping written where another key belongs)
    type_hint: Callable[[Any], str | None] | None = field(default=None, compare=False)
    max_length: int | None = None  # characters
    length_hint: str | None = None  # why the limit, and what to do

    def accepts_type(self, value: Any) -> bool:
        return isinstance(value, str)

    def check(self, value: Any, path: DocPath, problems: Problems) -> bool:
        if not isinstance(value, str):
            problems.add(path, "wrong type", expected="a string", got=show(value),
                         hint=self.type_hint(value) if self.type_hint else None)
            return False
        if self.max_length is not None and len(value) > self.max_length:  # before the rest: never echo it whole
            problems.add(path, f"the {self.what} is {len(value)} characters long",
                         expected=f"at most {self.max_length}", hint=self.length_hint)
            return False
        if self.enum is not None:
            pool = {e.lower(): e for e in self.enum} if self.case_insensitive else {e: e for e in self.enum}
            probe = value.lower() if self.case_insensitive else value
            if probe not in pool:
                problems.add(path, f"unknown {self.what} {show(value)}", expected=self.expected or one_of(self.enum),
                             hint=did_you_mean(value, self.enum))
                return False
        if self.pattern is not None and not re.fullmatch(self.pattern, value):
            problems.add(path, f"invalid {self.what} {show(value)}", expected=self.pattern_hint or f"text matching {self.pattern}")
            return False
        return True

    def json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "string"}
        if self.enum is not None:
            if self.case_insensitive:
                out["pattern"] = _ci_pattern(list(self.enum))
            else:
                out["enum"] = list(self.enum)
        if self.pattern is not None:
            out["pattern"] = f"^(?:{self.pattern})$"
        if self.max_length is not None:
            out["maxLength"] = self.max_length
        return self._doc(out)


@dataclass(frozen=True)
class Int(Node):
    description: str = ""
    minimum: int | None = None

    def accepts_type(self, value: Any) -> bool:
        return isinstance(value, int) and not isinstance(value, bool)

    def check(self, value: Any, path: DocPath, problems: Problems) -> bool:
        if not self.accepts_type(value):
            problems.add(path, "wrong type", expected="an integer", got=show(value))
            return False
        if self.minimum is not None and value < self.minimum:
            word = "a positive integer" if self.minimum == 1 else f"an integer >= {self.minimum}"
            problems.add(path, "out of range", expected=word, got=show(value))
            return False
        return True

    def json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "integer"}
        if self.minimum is not None:
            out["minimum"] = self.minimum
        return self._doc(out)


@dataclass(frozen=True)
class Num(Node):
    description: str = ""
    minimum: float | None = None

    def accepts_type(self, value: Any) -> bool:
        return isinstance(value, (int, float)) and not isinstance(value, bool)

    def check(self, value: Any, path: DocPath, problems: Problems) -> bool:
        if not self.accepts_type(value):
            problems.add(path, "wrong type", expected="a number", got=show(value))
            return False
        if self.minimum is not None and not value >= self.minimum:  # "not >=": NaN is out of range too
            problems.add(path, "out of range", expected=f"a number >= {self.minimum:g}", got=show(value))
            return False
        return True

    def json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "number"}
        if self.minimum is not None:
            out["minimum"] = self.minimum
        return self._doc(out)


@dataclass(frozen=True)
class Bool(Node):
    description: str = ""

    def accepts_type(self, value: Any) -> bool:
        return isinstance(value, bool)

    def check(self, value: Any, path: DocPath, problems: Problems) -> bool:
        if not isinstance(value, bool):
            problems.add(path, "wrong type", expected="true or false", got=show(value))
            return False
        return True

    def json(self) -> dict[str, Any]:
        return self._doc({"type": "boolean"})


@dataclass(frozen=True)
class Scalar(Node):
    """Any string, number or boolean (defaults; their type is checked against the input's)."""

    description: str = ""

    def accepts_type(self, value: Any) -> bool:
        return isinstance(value, (str, int, float, bool))

    def check(self, value: Any, path: DocPath, problems: Problems) -> bool:
        if not self.accepts_type(value):
            problems.add(path, "wrong type", expected="a string, number or boolean", got=show(value))
            return False
        return True

    def json(self) -> dict[str, Any]:
        return self._doc({"type": ["string", "number", "integer", "boolean"]})


@dataclass(frozen=True)
class Anything(Node):
    """Free-form content passed through untouched (e.g. a conda file's body)."""

    description: str = ""

    def check(self, value: Any, path: DocPath, problems: Problems) -> bool:
        return True

    def json(self) -> dict[str, Any]:
        return self._doc({})


@dataclass(frozen=True)
class ListOf(Node):
    item: Node
    description: str = ""

    def accepts_type(self, value: Any) -> bool:
        return isinstance(value, list)

    def check(self, value: Any, path: DocPath, problems: Problems) -> bool:
        if not isinstance(value, list):
            problems.add(path, "wrong type", expected="a list", got=show(value))
            return False
        return all([self.item.check(v, path + (i,), problems) for i, v in enumerate(value)])

    def json(self) -> dict[str, Any]:
        return self._doc({"type": "array", "items": self.item.json()})


@dataclass(frozen=True)
class Obj(Node):
    """A mapping with known keys; unknown keys are errors with a did-you-mean."""

    fields: Mapping[str, Node]
    required: tuple[str, ...] = ()
    description: str = ""
    what: str = "key"

    def accepts_type(self, value: Any) -> bool:
        return isinstance(value, dict)

    def check(self, value: Any, path: DocPath, problems: Problems) -> bool:
        if not isinstance(value, dict):
            problems.add(path, "wrong type", expected="a mapping", got=show(value))
            return False
        ok = True
        for key, item in value.items():
            node = self.fields.get(key)
            if node is None:
                problems.add(path + (key,), f"unknown {self.what} '{key}'", expected=one_of(self.fields),
                             hint=did_you_mean(key, self.fields), at_key=True)
                ok = False
            else:
                ok = node.check(item, path + (key,), problems) and ok
        for key in self.required:
            if key not in value:
                problems.add(path, f"missing required key '{key}'", hint=f"add '{key}:' here")
                ok = False
        return ok

    def json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "type": "object",
            "properties": {k: v.json() for k, v in self.fields.items()},
            "additionalProperties": False,
        }
        if self.required:
            out["required"] = list(self.required)
        return self._doc(out)


NAME_RE = r"[A-Za-z_][A-Za-z0-9_]*"


@dataclass(frozen=True)
class MapOf(Node):
    """A mapping from names the user chooses (inputs, env vars) to values of one shape."""

    value: Node
    description: str = ""
    key_pattern: str | None = None
    key_what: str = "name"

    def accepts_type(self, value: Any) -> bool:
        return isinstance(value, dict)

    def check(self, value: Any, path: DocPath, problems: Problems) -> bool:
        if not isinstance(value, dict):
            problems.add(path, "wrong type", expected="a mapping of names to values", got=show(value))
            return False
        ok = True
        for key, item in value.items():
            if self.key_pattern and not re.fullmatch(self.key_pattern, key):
                problems.add(path + (key,), f"invalid {self.key_what} '{key}'",
                             expected="letters, digits and underscores, not starting with a digit", at_key=True)
                ok = False
            ok = self.value.check(item, path + (key,), problems) and ok
        return ok

    def json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "object", "additionalProperties": self.value.json()}
        if self.key_pattern:
            out["propertyNames"] = {"pattern": f"^{self.key_pattern}$"}
        return self._doc(out)


@dataclass(frozen=True)
class Union(Node):
    """One of several shapes, chosen by the value's YAML type (string vs mapping, ...)."""

    options: tuple[Node, ...]
    description: str = ""
    expected: str = ""

    def accepts_type(self, value: Any) -> bool:
        return any(o.accepts_type(value) for o in self.options)

    def check(self, value: Any, path: DocPath, problems: Problems) -> bool:
        for option in self.options:
            if option.accepts_type(value):
                return option.check(value, path, problems)
        problems.add(path, "wrong type", expected=self.expected, got=show(value))
        return False

    def json(self) -> dict[str, Any]:
        return self._doc({"anyOf": [o.json() for o in self.options]})


@dataclass(frozen=True)
class Tagged(Node):
    """A mapping whose ``tag`` key (e.g. ``type``) picks which fields the rest may have.

    ``untagged``: the shape of a mapping without the tag (Azure gives a job's input without
    ``type:`` a default one); None makes the tag required. ``lists``: when set (what such a
    list holds, for messages), a list of tags that all name one shape picks it (a Component
    SDK port typed ``[AnyFile, AnyDirectory]``)."""

    tag: str
    variants: Mapping[str, Obj]  # tag value (matched case-insensitively) -> shape
    description: str = ""
    what: str = "type"
    untagged: Obj | None = None
    lists: str = ""
    _lower: dict[str, Obj] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        self._lower.update({k.lower(): v for k, v in self.variants.items()})

    def accepts_type(self, value: Any) -> bool:
        return isinstance(value, dict)

    def variant(self, value: Any) -> Obj | None:
        tag = value.get(self.tag) if isinstance(value, dict) else None
        if isinstance(tag, list) and self.lists:
            shapes = [self._lower.get(t.lower()) if isinstance(t, str) else None for t in tag]
            return shapes[0] if shapes and shapes[0] is not None and all(s is shapes[0] for s in shapes) else None
        return self._lower.get(tag.lower()) if isinstance(tag, str) else None

    def check(self, value: Any, path: DocPath, problems: Problems) -> bool:
        if not isinstance(value, dict):
            problems.add(path, "wrong type", expected=f"a mapping with '{self.tag}:'", got=show(value))
            return False
        if self.tag not in value:
            if self.untagged is not None:
                return self.untagged.check(value, path, problems)
            problems.add(path, f"missing required key '{self.tag}'", expected=one_of(self.variants))
            return False
        tag = value[self.tag]
        shape = self.variant(value)
        if shape is None:
            where = path + (self.tag,)
            if isinstance(tag, str):
                problems.add(where, f"unknown {self.what} {show(tag)}", expected=one_of(self.variants),
                             hint=did_you_mean(tag, self.variants))
            elif isinstance(tag, list) and self.lists:
                unknown = [t for t in tag if not isinstance(t, str) or t.lower() not in self._lower]
                if unknown:
                    problems.add(where, f"unknown {self.what} {show(unknown[0])}", expected=one_of(self.variants),
                                 hint=did_you_mean(unknown[0], self.variants) if isinstance(unknown[0], str) else None)
                else:
                    problems.add(where, f"a list of {self.what}s that {'is empty' if not tag else 'mixes kinds'}",
                                 expected=f"a list of {self.lists}",
                                 got=", ".join(tag) if tag else None)
            else:
                problems.add(where, "wrong type", expected="a string naming the " + self.what, got=show(tag))
            return False
        return shape.check(value, path, problems)

    def json(self) -> dict[str, Any]:
        groups: dict[int, tuple[Obj, list[str]]] = {}
        for name, shape in self.variants.items():
            groups.setdefault(id(shape), (shape, []))[1].append(name)
        names: dict[str, Any] = {"type": "string", "pattern": _ci_pattern(list(self.variants))}
        branches: list[dict[str, Any]] = []
        for shape, group in groups.values():
            one: dict[str, Any] = {"type": "string", "pattern": _ci_pattern(group)}
            if self.lists and len(group) > 1:
                one = {"anyOf": [one, {"type": "array", "minItems": 1, "items": one}]}
            branches.append({"if": {"required": [self.tag], "properties": {self.tag: one}}, "then": shape.json()})
        if self.lists:  # a list names types of one shape (one group)
            names = {"anyOf": [names] + [{"type": "array", "minItems": 1,
                                          "items": {"type": "string", "pattern": _ci_pattern(group)}}
                                         for _shape, group in groups.values() if len(group) > 1]}
        out: dict[str, Any] = {"type": "object", "properties": {self.tag: names}, "allOf": branches}
        if self.untagged is None:
            out["required"] = [self.tag]
        else:
            branches.append({"if": {"not": {"required": [self.tag]}}, "then": self.untagged.json()})
        return self._doc(out)


@dataclass(frozen=True)
class Null(Node):
    """An empty value (``key:`` with nothing after it)."""

    description: str = ""

    def accepts_type(self, value: Any) -> bool:
        return value is None

    def check(self, value: Any, path: DocPath, problems: Problems) -> bool:
        if value is not None:
            problems.add(path, "wrong type", expected="nothing", got=show(value))
            return False
        return True

    def json(self) -> dict[str, Any]:
        return self._doc({"type": "null"})
