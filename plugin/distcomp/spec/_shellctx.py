"""Where a position of a command line sits in the shell's grammar, to put a value in safely.

A value pasted as quoted text is right only where that quoting means what it says: in plain
words (``'v'``) and in a top-level ``"..."`` (close, ``'v'``, reopen). Elsewhere the shell
parses the text again by other rules: inside ``$( )``, backticks, ``${X:-...}``, a
here-document or a comment, ``"...'v'..."`` can run ``$(...)`` in the value or keep its
quotes. There a value goes in as a reference to a shell variable assigned at the line's start
(``"${dc_in_x}"``): the shell expands a parameter once and never parses its value again, in
every one of those contexts. Where nothing can be right, the spec is refused: inside the
script of ``sh -c`` / ``eval`` / ``ssh`` (another shell parses the value), in ``$(( ))``
(bash evaluates ``a[$(cmd)]`` in a value), in ``'...'`` or a quoted here-document that is not
plain top-level text, and in a ``${NAME}`` name.

``Tracker`` reads the line one construct at a time and keeps a stack of open contexts. Once
anything nested has opened (``$(``, a backtick, ``${X:-``, ``$((``, ``<<``, a comment, ``$'``)
every later value uses a variable too, even in plain text: a misread ``case`` pattern's ``)``
then costs at most a wrong split, never a value run as code.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable, Literal

from ..errors import UsageError

Kind = Literal["sq", "ansi", "dq", "cmd", "sub", "bt", "param", "pword", "pword-dq", "arith", "comment", "heredoc"]
# how a value goes in: pasted as one quoted word (plain / inside "..." / inside '...'), as a
# variable reference ("${v}" in plain words, ${v} where the text is already double-quoted)
Placement = Literal["paste", "paste-dq", "paste-sq", "var", "var-dq"]

_SEPARATORS = frozenset(";&|()\n")
_WORD_END = frozenset(" \t\n;&|()<>")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|[0-9@*#?$!-]")
_HEREDOC = re.compile(r"<<(-?)[ \t]*((?:[^\s;&|<>()'\"\\]|\\.|'[^']*'|\"[^\"]*\")+)")
# programs whose argument is a line for another shell: a value in it is parsed again
_SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "busybox", "su", "runuser"})
_LINE_RUNNERS = frozenset({"eval", "ssh", "watch"})  # every later word is joined into a shell line


@dataclass
class Frame:
    kind: Kind
    at: int  # where it opened in the source
    delim: str = ""  # a here-document's end line
    quoted: bool = False  # a here-document with a quoted delimiter: its body is literal
    strip_tabs: bool = False
    depth: int = 0  # parentheses open inside $(( ))
    named: bool = False  # ${...}: the name has been read
    line_start: bool = True  # a here-document's body: at the start of a line
    words: list[int] = field(default_factory=list)  # plain frames: [where the command starts, the word starts]
    command: str | None = None  # plain frames: the program this command runs (past NAME=v, exec, ...)
    shell: bool = False  # a shell (sh, bash, su, ...) is among this command's words so far
    script_next: bool = False  # the last word was that shell's -c: the next word is its script
    last: tuple[str, ...] = ()  # the last two words, to name them


class Refusal(UsageError):
    """A placeholder where no quoting makes its value plain text (the spec is refused)."""

    def __init__(self, message: str, hint: str) -> None:
        super().__init__(message)
        self.message, self.hint = message, hint


class Tracker:
    def __init__(self, source: str, is_ref: Callable[[int], bool] = lambda i: False) -> None:
        self.s = source
        self.is_ref = is_ref  # a value's placeholder starts here (v1's {inputs.x} after a $)
        self.frames: list[Frame] = [Frame("sub", 0, words=[0, 0])]  # the line itself: plain words
        self.nested = False  # something nested has opened: no more pasting (see the module doc)
        self.pending: list[Frame] = []  # here-documents whose body starts at the next newline

    @property
    def top(self) -> Frame:
        return self.frames[-1]

    @property
    def depth(self) -> int:
        return len(self.frames)

    def quoted(self) -> bool:
        """Inside quotes at some level (v1's ``[`` is then a bracket, not an optional block)."""
        return any(f.kind in ("sq", "dq", "ansi", "pword-dq") for f in self.frames)

    def pasteable(self) -> bool:
        """Whether quoted text put in here means what it says (also for filling ``$NAME``)."""
        return not self.nested and all(f.kind == "sub" for f in self.frames[:-1]) and self.top.kind in ("sub", "dq")

    def place(self, ref_source: str) -> Placement:
        """How a value goes in at the current position; ``Refusal`` where no way is right."""
        self._refuse_nested_shell(ref_source)
        kind = self.top.kind
        self.top.line_start = False  # a here-document line that holds a value is not its end line
        plain_path = not self.nested and all(f.kind == "sub" for f in self.frames[:-1])
        if kind in ("sq", "ansi"):
            if kind == "sq" and plain_path:
                return "paste-sq"  # literal text the program gets as is (a shell's script is refused above)
            where = "in a line that also uses $( ), backticks, ${X:-...}, a here-document or a comment before it" \
                if all(f.kind == "sub" for f in self.frames[:-1]) else \
                "within a nested part of the command"
            raise Refusal(f"{ref_source} is inside '...' {where}, where the shell may read those quotes "
                          "differently", hint=f'use double quotes there: "... {ref_source} ..."')
        if kind == "arith":
            raise Refusal(f"{ref_source} is inside $(( )): the shell would evaluate the value as an expression "
                          "(bash runs a[$(cmd)] in it)", hint="compute it in the program, which gets the value as an argument")
        if kind == "param":
            raise Refusal(f"{ref_source} is inside a ${{NAME}} name", hint=f"use it as a default instead: ${{NAME:-{ref_source}}}")
        if kind == "heredoc":
            if self.top.quoted:
                raise Refusal(f"{ref_source} is inside a here-document with a quoted end word, which is literal "
                              "text another program may run", hint="leave the end word unquoted (<<EOF) to fill values in")
            return "var-dq"
        if kind in ("dq", "pword-dq", "comment"):
            return "paste-dq" if kind == "dq" and plain_path else "var-dq"
        return "paste" if plain_path else "var"

    def _refuse_nested_shell(self, ref_source: str) -> None:
        """The word being read, at any level, is the line of ``sh -c`` / ``eval`` / ``ssh``
        (the words before it were read once, as they ended: no rescan per value)."""
        for frame in self.frames:
            if frame.script_next or frame.command in _LINE_RUNNERS:
                what = " ".join(frame.last) if frame.script_next else frame.command
                raise Refusal(f"{ref_source} is inside the command line that '{what}' gives another shell, which "
                              "would parse the value again as code",
                              hint=f"pass it as an argument instead: bash -c '... \"$1\" ...' _ {ref_source}")

    # -- reading -------------------------------------------------------------------------------

    def step(self, i: int) -> int:
        """Read the construct at ``i`` (the caller copies it as written); its length."""
        s, f = self.s, self.top
        c = s[i]
        if f.kind == "heredoc":
            return self._heredoc(i)
        if f.kind == "comment":
            if c == "\n":
                self.frames.pop()
                return self.step(i)  # the newline also ends the command it comments
            return 1
        if f.kind == "sq":
            if c == "'":
                self.frames.pop()
            return 1
        if f.kind == "ansi":
            if c == "\\":
                return min(2, len(s) - i)
            if c == "'":
                self.frames.pop()
            return 1
        if c == "\\":
            return min(2, len(s) - i)
        if c == "$":
            return self._dollar(i)
        if c == "`":
            if f.kind == "bt":
                self.frames.pop()
            else:
                self.nested = True
                self._push("bt", i, plain=True)
            return 1
        if f.kind == "param":
            return self._param(i)
        if f.kind == "arith":
            if c == "(":
                f.depth += 1
            elif c == ")":
                if f.depth:
                    f.depth -= 1
                elif s.startswith("))", i):
                    self.frames.pop()
                    return 2
            return 1
        if f.kind in ("dq", "pword-dq"):
            if c == '"':
                if f.kind == "dq":
                    self.frames.pop()
                else:
                    self._push("dq", i)
            elif c == "}" and f.kind == "pword-dq":
                self.frames.pop()
            return 1
        return self._plain(i)

    def _push(self, kind: Kind, i: int, *, plain: bool = False, **kw: object) -> None:
        self.frames.append(Frame(kind, i, words=[i + 1, i + 1] if plain else [], **kw))  # type: ignore[arg-type]

    def _dollar(self, i: int) -> int:
        s = self.s
        if s.startswith("$((", i):
            self.nested = True
            self._push("arith", i)
            return 3
        if s.startswith("$(", i):
            self.nested = True
            self._push("cmd", i, plain=True)
            self.top.words = [i + 2, i + 2]
            return 2
        if s.startswith("${", i) and not self.is_ref(i + 1):
            self._push("param", i)
            return 2
        if s.startswith("$'", i) and self.top.kind not in ("dq", "pword-dq"):
            self.nested = True
            self._push("ansi", i)
            return 2
        return 1

    def _param(self, i: int) -> int:
        """``${`` read: a name (a value there is refused), then ``}`` or an operator and a word."""
        f, c = self.top, self.s[i]
        if c == "}":
            self.frames.pop()
            return 1
        if not f.named:
            if c in "#!" and self.s[i + 1:i + 2] not in ("}", ""):  # ${#x} ${!x}: a prefix
                f.named = True
                m = _NAME.match(self.s, i + 1)
                return 1 + (m.end() - i - 1 if m else 0)
            m = _NAME.match(self.s, i)
            f.named = True
            if m:
                return m.end() - i
        # an operator: the rest up to the matching } is a word, quoted as its surroundings are
        outer = self.frames[-2].kind if len(self.frames) > 1 else "sub"
        dq = outer in ("dq", "pword-dq", "heredoc")
        self.frames[-1] = Frame("pword-dq" if dq else "pword", f.at, words=[] if dq else [i + 1, i + 1])
        self.nested = True
        return 1

    def _plain(self, i: int) -> int:
        s, f, c = self.s, self.top, self.s[i]
        if c == "'":
            self._push("sq", i)
        elif c == '"':
            self._push("dq", i)
        elif c == "}" and f.kind == "pword":
            self.frames.pop()
        elif c == "(" and s.startswith("((", i) and self._at_command_start(i):
            self.nested = True  # bash's (( )) arithmetic command
            self._push("arith", i)
            return 2
        elif c == "(":
            self._push("sub", i, plain=True)
        elif c == ")" and f.kind in ("cmd", "sub") and len(self.frames) > 1:
            self.frames.pop()
        elif c == "#" and (i == 0 or s[i - 1] in _WORD_END or s[i - 1] in "[]"):
            self.nested = True  # a comment: a newline in a value pasted there would end it
            self._push("comment", i)
        elif c == "<" and s.startswith("<<", i) and not s.startswith("<<<", i):
            m = _HEREDOC.match(s, i)
            if m:
                self.nested = True
                word = m.group(2)
                delim = re.sub(r"\\(.)", r"\1", word).replace("'", "").replace('"', "")
                self.pending.append(Frame("heredoc", i, delim=delim, quoted=any(q in word for q in "'\"\\"),
                                          strip_tabs=bool(m.group(1))))
                return m.end() - i
        elif c == "\n" and self.pending:
            self._word_break(i)
            self.frames.extend(reversed(self.pending))  # the first one's body comes first
            self.pending = []
        elif c in _WORD_END:
            self._word_break(i)
        return 1

    def _at_command_start(self, i: int) -> bool:
        f = self.top
        return bool(f.words) and not self.s[f.words[0]:i].strip()

    def _word_break(self, i: int) -> None:
        f = self.top
        if not f.words:
            return
        text = self.s[f.words[-1]:i].strip()
        if text:
            self._word(f, text)
        if self.s[i] in _SEPARATORS:
            f.words = [i + 1, i + 1]  # a new command
            f.command, f.shell, f.script_next, f.last = None, False, False, ()
        else:
            f.words[-1] = i + 1

    @staticmethod
    def _word(f: Frame, text: str) -> None:
        """A word of ``f``'s command has ended: note what it tells about the next ones."""
        words = _words(text) if len(text) < 256 else [text]  # a program or flag name is short: no long shlex
        word = words[0] if len(words) == 1 else text
        name = word.rsplit("/", 1)[-1]
        if f.command is None and not (_ASSIGNMENT.match(word) or name in _WRAPPERS or name.startswith("-")
                                      or name.isdigit()):
            f.command = name
        f.script_next = f.shell and re.fullmatch(r"-[A-Za-z]*c[A-Za-z]*", name) is not None
        f.shell = f.shell or name in _SHELLS
        f.last = (*f.last[-1:], word)

    def _heredoc(self, i: int) -> int:
        s, f = self.s, self.top
        if f.line_start:
            end = s.find("\n", i)
            end = len(s) if end < 0 else end
            line = s[i:end]
            if (line.lstrip("\t") if f.strip_tabs else line) == f.delim:
                self.frames.pop()
                return end - i if end > i else self.step(i)
            f.line_start = False
        c = s[i]
        if c == "\n":
            f.line_start = True
            return 1
        if f.quoted:
            return 1
        if c == "\\":
            return min(2, len(s) - i)
        if c == "$":
            return self._dollar(i)
        if c == "`":
            self._push("bt", i, plain=True)  # the here-document already made the line nested
        return 1


_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
_WRAPPERS = frozenset({"exec", "nohup", "env", "sudo", "time", "command", "builtin", "nice", "timeout"})


def _words(text: str) -> list[str]:
    import shlex

    if not any(q in text for q in "'\"\\"):
        return text.split()
    try:
        return shlex.split(text, comments=False)
    except ValueError:  # a backslash at the end, a quote in a backtick: near enough for the check
        return text.split()
