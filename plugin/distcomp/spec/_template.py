"""Command templates: the component author's shell command line, with typed holes for values.

Both dialects parse into the same items:

* v1 (Component SDK): ``{inputs.x}``, ``{outputs.y}``, optional blocks ``[ ... ]``
* v2 (azure-ai-ml):   ``${{inputs.x}}``, ``${{outputs.y}}``, optional blocks ``$[[ ... ]]``

As Azure ML does, the command runs through a shell on every rank (``cd src && python
train.py --rank $RANK``): ``shell_line`` is the author's text with each value put in as ONE
shell-quoted word, whatever it holds (``a b; rm -rf /`` is still one argument and runs
nothing), so the shell expands only what the author wrote. A command with no shell syntax at
all is exec'd as its words (``words``), which is the same program with the same argv, one
process fewer. ``$NAME`` references are filled by the shell from the rank's own environment.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Iterator, Literal, Mapping, Sequence, Union

from ..errors import UsageError
from ._diagnostics import closest
from ._shellctx import Refusal, Tracker

Dialect = Literal["v1", "v2"]


@dataclass(frozen=True)
class Text:
    text: str


@dataclass(frozen=True)
class Ref:
    kind: Literal["inputs", "outputs"]
    name: str
    source: str  # as written, e.g. "{inputs.x}", to locate it in the file


@dataclass(frozen=True)
class Env:
    name: str
    quoted: bool  # inside "...": an unset variable leaves an empty argument, as in a shell


@dataclass(frozen=True)
class Quote:
    """Marks that a word exists even if empty (``""`` is an empty argument)."""


@dataclass(frozen=True)
class Break:
    """Unquoted whitespace: ends the current word."""


@dataclass(frozen=True)
class Block:
    items: tuple["Item", ...]
    source: str


Item = Union[Text, Ref, Env, Quote, Break, Block]


@dataclass(frozen=True)
class TemplateIssue:
    message: str
    snippet: str  # a token without whitespace, to find in the file for a precise line:col
    occurrence: int = 0  # which appearance of the snippet in the command (folding keeps tokens intact)
    hint: str | None = None
    severity: Literal["error", "warning"] = "error"


class RenderError(UsageError, ValueError):
    """A value needed by the template is missing (validation normally prevents this)."""


ValueLookup = Callable[[Ref], "str | None"]


@dataclass(frozen=True)
class CommandTemplate:
    """A parsed command; ``source`` keeps the text as written for display."""

    source: str
    items: tuple[Item, ...]
    dialect: Dialect = "v2"

    def references(self) -> Iterator[tuple[Ref, bool]]:
        """Every ``(ref, inside_optional_block)`` in order."""
        def walk(items: tuple[Item, ...], inside: bool) -> Iterator[tuple[Ref, bool]]:
            for item in items:
                if isinstance(item, Ref):
                    yield item, inside
                elif isinstance(item, Block):
                    yield from walk(item.items, True)
        return walk(self.items, False)

    @property
    def needs_shell(self) -> bool:
        """Whether the command uses anything only a shell does: operators, ``$VAR``, globs,
        redirections, several lines. Without any, its words are exec'd directly."""
        return _needs_shell(self.source, self.dialect)

    def argv(self, lookup: ValueLookup) -> list[str]:
        """What each rank executes: the words, or ``/bin/sh -c LINE`` when the command needs a shell."""
        if self.needs_shell:
            return [*SHELL, self.shell_line(lookup)]
        return self.render(lookup)

    def shell_line(self, lookup: ValueLookup, env: Mapping[str, str] | None = None) -> str:
        """The command line as the shell gets it: the author's text, each value one quoted word
        (``env``: also fill these ``$NAME`` references, to show what one rank would run)."""
        return _ShellLine(self.source, self.dialect, lookup, env or {}).run()

    def as_v2(self) -> str:
        """The same shell line in azure-ai-ml's syntax (``${{inputs.x}}``, ``$[[ ... ]]``)."""
        return _ShellLine(self.source, self.dialect, lambda ref: None, {}, v2=True).run()

    def render(self, lookup: ValueLookup, env: Mapping[str, str] | None = None) -> list[str]:
        """The words, split as a shell would split them. ``lookup`` answers a value or None for
        an unset optional input; ``env`` fills ``$VAR`` references (None keeps them as written)."""
        words: list[str] = []
        state = _Word()

        def emit(items: tuple[Item, ...]) -> None:
            for item in items:
                if isinstance(item, Break):
                    state.flush(words)
                elif isinstance(item, Text):
                    state.add(item.text, keep=True)
                elif isinstance(item, Quote):
                    state.add("", keep=True)
                elif isinstance(item, Ref):
                    value = lookup(item)
                    if value is None:
                        raise RenderError(f"no value for {item.kind[:-1]} '{item.name}' used outside an optional block")
                    state.add(value, keep=True)  # a value never vanishes, even when empty
                elif isinstance(item, Env):
                    if env is None:
                        state.add("${" + item.name + "}", keep=True)
                    else:
                        state.add(env.get(item.name, ""), keep=item.quoted)
                elif isinstance(item, Block):
                    if all(lookup(ref) is not None for ref in _refs(item.items)):
                        emit(item.items)
        emit(self.items)
        state.flush(words)
        return words


class _Word:
    """The word being built: its parts, and whether it survives if it ends up empty."""

    def __init__(self) -> None:
        self.parts: list[str] | None = None
        self.keep = False

    def add(self, text: str, *, keep: bool) -> None:
        if self.parts is None:
            self.parts = []
        self.parts.append(text)
        self.keep = self.keep or keep or bool(text)

    def flush(self, words: list[str]) -> None:
        if self.parts is not None and self.keep:
            words.append("".join(self.parts))
        self.parts, self.keep = None, False


def _refs(items: tuple[Item, ...]) -> Iterator[Ref]:
    for item in items:
        if isinstance(item, Ref):
            yield item
        elif isinstance(item, Block):
            yield from _refs(item.items)


_V1_REF = re.compile(r"\{(inputs|outputs)\.([^{}\s]*)\}")
_V1_NEAR_REF = re.compile(r"\{([A-Za-z_]+)\.([A-Za-z0-9_]+)\}")  # {inptus.x}: probably a typo
_V2_EXPR = re.compile(r"\$\{\{(.*?)\}\}", re.S)
_V2_REF = re.compile(r"\s*(inputs|outputs)\.([A-Za-z0-9_]*)\s*")
_ENV = re.compile(r"\$(?:([A-Za-z_][A-Za-z0-9_]*)|\{([A-Za-z_][A-Za-z0-9_]*)\})")
SHELL = ("/bin/sh", "-c")  # POSIX sh: in every image, as on every node
# outside quotes, what makes a line more than words (v1's [ ] are its optional blocks)
_SHELL_CHARS = {"v1": set("$;&|<>()`*?~#!\n{}"), "v2": set("$;&|<>()`*?~#!\n{}[]")}
# a first word the shell itself acts on (builtins, keywords, NAME=value assignments)
_SHELL_WORDS = frozenset({"cd", "export", "exec", "if", "for", "while", "until", "case", "set", "source", ".",
                          "eval", "ulimit", "umask", "unset", "trap", "{", "!", "alias", "type", "wait", "read"})
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_PLAIN_RUN = re.compile(r"[^\s{}$\[\]\\'\"`()#<>;&|*?~!]+")  # text no context reads specially


def as_shell_line(argv: Sequence[str]) -> str:
    """A rendered command (``ComponentSpec.render``'s argv) as one shell line: the line itself
    where it runs in a shell already, else its words quoted."""
    import shlex

    return argv[2] if tuple(argv[:2]) == SHELL else shlex.join(argv)

def parse(source: str, dialect: Dialect) -> tuple[CommandTemplate, list[TemplateIssue]]:
    """Parse ``source``; structural problems come back as issues, never exceptions."""
    p = _Parser(source, dialect)
    items = p.run()
    if not any(i.severity == "error" for i in p.issues):  # a value where no quoting is exact: refused
        line = _ShellLine(source, dialect, lambda ref: "x", {}, check=True)
        line.run()
        for snippet, at, why in line.refusals:
            p.issues.append(TemplateIssue(why.message, snippet, line.s.count(snippet, 0, at), hint=why.hint))
    return CommandTemplate(source, items, dialect), p.issues


class _Chars(list[str]):
    """A run of literal text being read, joined once into a Text (adding to a Text per
    character copied it each time: quadratic in a long word)."""


def _joined(items: list[Item]) -> tuple[Item, ...]:
    return tuple(Text("".join(i)) if isinstance(i, _Chars) else i for i in items)


class _Parser:
    def __init__(self, source: str, dialect: Dialect) -> None:
        self.s = source
        self.dialect = dialect
        self.i = 0
        self.issues: list[TemplateIssue] = []
        # a stack of open blocks: (items so far, start offset)
        self.stack: list[tuple[list[Item], int]] = [([], 0)]

    @property
    def out(self) -> list[Item]:
        return self.stack[-1][0]

    def issue(self, message: str, snippet: str, at: int, **kw: object) -> None:
        self.issues.append(TemplateIssue(message, snippet, self.s.count(snippet, 0, at), **kw))  # type: ignore[arg-type]

    def text(self, t: str) -> None:
        if self.out and isinstance(self.out[-1], _Chars):
            self.out[-1].append(t)
        else:
            self.out.append(_Chars([t]))  # type: ignore[arg-type]

    def run(self) -> tuple[Item, ...]:
        quote: str | None = None
        quote_start = 0
        s = self.s
        while self.i < len(s):
            c = s[self.i]
            if self.try_ref(quote):
                continue
            if self.try_block(quote):
                continue
            if quote == "'":
                if c == "'":
                    quote = None
                else:
                    self.text(c)
                self.i += 1
                continue
            if c == "$" and self.try_env(quoted=quote == '"'):
                continue
            if quote == '"':
                if c == '"':
                    quote = None
                elif c == "\\" and self.i + 1 < len(s) and s[self.i + 1] in '"\\$`':
                    self.i += 1
                    self.text(s[self.i])
                else:
                    self.text(c)
                self.i += 1
                continue
            if c in "'\"":
                quote, quote_start = c, self.i
                self.out.append(Quote())
            elif c == "\\" and self.i + 1 < len(s):
                self.i += 1
                if s[self.i] != "\n":  # backslash-newline joins lines, as in a shell
                    self.text(s[self.i])
            elif c.isspace():
                if not self.out or not isinstance(self.out[-1], Break):
                    self.out.append(Break())
            else:
                self.text(c)
            self.i += 1
        if quote is not None:
            self.issue(f"unclosed {quote} quote", quote, quote_start, hint=f"add the closing {quote}")
        opener, closer = ("[", "]") if self.dialect == "v1" else ("$[[", "]]")
        while len(self.stack) > 1:  # close it at the end, so its contents raise no further errors
            items, start = self.stack.pop()
            self.issue(f"unbalanced '{opener}': the optional block is never closed", opener, start,
                       hint=f"close it with '{closer}'")
            self.out.append(Block(_joined(items), s[start:]))
        return _joined(self.out)

    def try_ref(self, quote: str | None) -> bool:
        s, i = self.s, self.i
        if self.dialect == "v1":
            if s[i] != "{":
                return False
            m = _V1_REF.match(s, i)
            if m:
                self.out.append(Ref(m.group(1), m.group(2), m.group(0)))  # type: ignore[arg-type]
                self.i = m.end()
                return True
            near = _V1_NEAR_REF.match(s, i)
            best = closest(near.group(1), ("inputs", "outputs")) if near else None
            if near and best:
                self.issue(f"'{near.group(0)}' is not a reference", near.group(0), i,
                           hint=f"did you mean '{{{best}.{near.group(2)}}}'?")
            return False
        if not s.startswith("${{", i):
            return False
        m = _V2_EXPR.match(s, i)
        if not m:
            self.issue("unclosed '${{': the expression is never closed", "${{", i, hint="close it with '}}'")
            self.text(s[i:])
            self.i = len(s)
            return True
        ref = _V2_REF.fullmatch(m.group(1))
        if ref:
            self.out.append(Ref(ref.group(1), ref.group(2), m.group(0)))  # type: ignore[arg-type]
        else:
            self.issue(f"unsupported expression '{m.group(0)}'", "${{", i,
                       hint="a component command may use ${{inputs.NAME}} and ${{outputs.NAME}}")
        self.i = m.end()
        return True

    def try_block(self, quote: str | None) -> bool:
        s, i = self.s, self.i
        if self.dialect == "v1":
            if quote is not None or s[i] not in "[]":  # quoted brackets are literal text
                return False
            opened, closed, width = s[i] == "[", s[i] == "]", 1
        else:
            opened, closed, width = s.startswith("$[[", i), s.startswith("]]", i), (3 if s.startswith("$[[", i) else 2)
            if not (opened or closed):
                return False
        opener, closer = ("[", "]") if self.dialect == "v1" else ("$[[", "]]")
        if opened:
            if len(self.stack) > 1:
                self.issue(f"nested optional blocks are not supported ('{opener}' inside '{opener}')", opener, i,
                           hint=f"close the first block with '{closer}' before opening another")
            self.stack.append(([], i))
        else:
            if len(self.stack) == 1:
                self.issue(f"unbalanced '{closer}': no optional block is open", closer, i,
                           hint=f"remove it or open the block with '{opener}'")
            else:
                items, start = self.stack.pop()
                self.out.append(Block(_joined(items), s[start:i + width]))
        self.i += width
        return True

    def try_env(self, *, quoted: bool) -> bool:
        m = _ENV.match(self.s, self.i)
        if not m:
            return False
        self.out.append(Env(m.group(1) or m.group(2), quoted))
        self.i = m.end()
        return True


def _needs_shell(source: str, dialect: Dialect) -> bool:
    line = _ShellLine(source, dialect, lambda ref: "x", {}, check=True)
    text = line.run()
    first = text.split(None, 1)[0] if text.split() else ""
    return line.special or first in _SHELL_WORDS or bool(_ASSIGNMENT.match(first))


class _ShellLine:
    """Copies the author's text as written, putting each value in where the shell reads it as
    exactly that text (``_shellctx``): one quoted word in plain words and in a top-level
    ``"..."`` (closing and reopening it: ``"a ${{inputs.x}}"`` -> ``"a "'VALUE'""``), a
    reference to a variable assigned at the line's start in nested parts (``"$(echo
    ${{inputs.x}})"`` -> ``dc_in_x='VALUE'; "$(echo "${dc_in_x}")"``), and keeping or dropping
    optional blocks. ``special``: whether anything outside quotes needs a shell. ``check``:
    collect the places no quoting makes safe (``refusals``) instead of raising."""

    def __init__(self, source: str, dialect: Dialect, lookup: ValueLookup, env: Mapping[str, str],
                 v2: bool = False, check: bool = False) -> None:
        self.s, self.dialect, self.lookup, self.env = source.strip(), dialect, lookup, env
        self.v2 = v2  # write references and blocks back in azure-ai-ml's syntax instead of values
        self.special = False
        self.check = check
        self.refusals: list[tuple[str, int, Refusal]] = []  # (the reference as written, where, why)
        self.assigned: dict[str, str] = {}  # variable -> value, in order of first use
        ref_at = _V1_REF if dialect == "v1" else _V2_EXPR
        self.ctx = Tracker(self.s, lambda i: ref_at.match(self.s, i) is not None)

    def run(self) -> str:
        out, _ = self._until(0, None)
        line = "".join(out).strip()
        if self.assigned:  # a plain word at the very start: the one place quoting is always exact
            import shlex

            line = " ".join(f"{name}={shlex.quote(value)}" for name, value in self.assigned.items()) + "; " + line
        return line

    def _value(self, value: str, quote: str | None) -> str:
        import shlex

        word = shlex.quote(value)
        return word if quote is None else f"{quote}{word}{quote}"  # close, the word, reopen

    def _put(self, ref: Ref, value: str, at: int) -> str:
        """The text that stands for ``value`` at ``at``; a refused place raises (or, checking, is noted)."""
        try:
            placement = self.ctx.place(ref.source)
        except Refusal as why:
            if not self.check:
                raise RenderError(f"{why.message}; {why.hint}") from None
            self.refusals.append((ref.source, at, why))
            return ""
        if placement in ("paste", "paste-dq", "paste-sq"):
            return self._value(value, {"paste": None, "paste-dq": '"', "paste-sq": "'"}[placement])
        name = f"dc_{ref.kind[:-1].replace('input', 'in').replace('output', 'out')}_{ref.name}"
        if not _IDENTIFIER.fullmatch(name):
            name = f"dc_ref{len(self.assigned)}"
        name = next(n for n in (name, *(f"{name}_{k}" for k in range(1, 1000)))
                    if self.assigned.get(n, value) == value)
        self.assigned[name] = value
        return "${" + name + "}" if placement == "var-dq" else '"${' + name + '}"'

    def _until(self, i: int, closer: str | None) -> tuple[list[str], int]:
        """Render from ``i`` to the end, or to ``closer`` (an optional block's end) in the context it opened in."""
        s, ctx = self.s, self.ctx
        out: list[str] = []
        depth = ctx.depth
        opener_v1 = self.dialect == "v1"
        while i < len(s):
            if ctx.top.kind not in ("param", "heredoc") and (run := _PLAIN_RUN.match(s, i)):
                out.append(run.group())  # nothing in it opens, closes or marks anything: one step
                i = run.end()
                continue
            c = s[i]
            if closer is not None and ctx.depth == depth and s.startswith(closer, i):
                return out, i + len(closer)
            ref = (_V1_REF.match(s, i) if opener_v1 else _V2_EXPR.match(s, i)) if c in "{$" else None
            if ref is not None and (opener_v1 or _V2_REF.fullmatch(ref.group(1))):
                kind, name = (ref.group(1), ref.group(2)) if opener_v1 else _V2_REF.fullmatch(ref.group(1)).groups()  # type: ignore[union-attr]
                if self.v2:
                    out.append(f"${{{{{kind}.{name}}}}}")
                    i = ref.end()
                    continue
                value = self.lookup(Ref(kind, name, ref.group(0)))  # type: ignore[arg-type]
                if value is None:
                    raise RenderError(f"no value for {kind[:-1]} '{name}' used outside an optional block")
                out.append(self._put(Ref(kind, name, ref.group(0)), value, i))  # type: ignore[arg-type]
                i = ref.end()
                continue
            block = "[" if opener_v1 and c == "[" and not ctx.quoted() else \
                "$[[" if not opener_v1 and s.startswith("$[[", i) else None
            if block is not None:
                outer, missing, assigned = self.lookup, [], dict(self.assigned)

                def inside(ref: Ref) -> str:  # a block with an unset value is left out, whole
                    value = outer(ref)
                    if value is None:
                        missing.append(ref)
                    return value or ""
                self.lookup = inside
                inner, i = self._until(i + len(block), "]" if opener_v1 else "]]")
                self.lookup = outer
                if self.v2:
                    out.append("$[[" + "".join(inner).strip() + "]]")
                elif not missing:
                    out.extend(inner)
                else:
                    self.assigned = assigned  # its values are not used
                continue
            kind = ctx.top.kind
            if c == "$" and ctx.pasteable() and (m := _ENV.match(s, i)) and (m.group(1) or m.group(2)) in self.env:
                out.append(self._value(self.env[m.group(1) or m.group(2)], '"' if kind == "dq" else None))
                i = m.end()
                continue
            if c != "\\":
                if kind == "dq":
                    self.special = self.special or c in "$`"
                elif kind not in ("sq", "ansi"):
                    self.special = self.special or c in _SHELL_CHARS[self.dialect]
            n = ctx.step(i)
            out.append(s[i:i + n])
            i += n
        return out, i
