"""An ``mpirun`` line as users write it, made right for the Open MPI that distcomp runs here.

Two rewrites, each a pure function of the line (and env), so that other steps on the same line
(for example wrapping the rank program) compose with them through ``split``:

* ``openmpi4``: Azure ML's images run Open MPI 4, whose parser reads any of its long options
  after a single dash (``-bind-to none -map-by slot -mca pml ob1``). The Open MPI 5 that pip
  installs reads ``-bind-to none`` as the program ``none``. Every option of Open MPI 4.1's
  ``mpirun`` written with one dash is written with two here (Open MPI 5 reads that form, and
  converts the ones it deprecated); the few it dropped that only tuned Open MPI 4's own runtime
  are left out, with a note. Nothing after the program is touched.
* ``apart``: nodes simulated on one machine must not share memory. btl/sm names its segments
  by host and local rank, so node0's and node1's local rank 0 map one segment (SIGSEGV in
  ``mca_btl_sm_poll_handle_frag``); coll/han splits by a locality that disagrees with the
  hostfile (hangs). Whatever the user names (``--mca btl ^openib``, ``OMPI_MCA_btl``), ``sm`` and
  ``han`` stay out: an exclusion list gains them, an inclusion list loses them (and gains
  ``tcp``, to reach the other nodes), with a note.

The option table is Open MPI 4.1's own (``orte/mca/schizo/ompi/schizo_ompi.c`` and
``opal/mca/base/mca_base_cmd_line.c`` at v4.1.8): the number after each name is how many
words it takes. Open MPI 4's parser matches ``-name`` against long names, single-dash names and
one-letter names alike; a word it does not know is an error there, so distcomp cannot tell how
many words such a word takes: ``unknown`` names it (``distcomp validate`` warns) and nothing
after it is rewritten.
"""

from __future__ import annotations

from collections import namedtuple

TYPE_CHECKING = False  # typing costs every process that imports this (an mpirun shim's too) ~10 ms; mypy reads True
if TYPE_CHECKING:
    from typing import Mapping, NamedTuple, Sequence

# Open MPI 4.1 mpirun: option name -> words it takes (long names, single-dash names, letters)
OMPI4: Mapping[str, int] = {
    **dict.fromkeys((
        "report-pid", "report-uri", "timeout", "hnp", "xml-file", "output-filename", "xterm", "stdin",
        "launch-agent", "preload-files", "app", "np", "n", "c", "max-vm-size", "hostfile", "machinefile",
        "default-hostfile", "ompi-server", "cf", "cartofile", "rf", "rankfile", "x", "host", "H",
        "cpus-per-proc", "cpus-per-rank", "npernode", "N", "npersocket", "map-by", "rank-by", "bind-to",
        "cpu-list", "ppr", "cpu-set", "wdir", "wd", "path", "debugger", "prefix", "report-events",
        "max-restarts", "personality", "am", "tune"), 1),
    **dict.fromkeys(("mca", "gmca"), 2),
    **dict.fromkeys((
        "h", "help", "V", "version", "v", "verbose", "q", "quiet", "report-state-on-timeout", "get-stack-traces",
        "report-child-jobs-separately", "xml", "tag-output", "timestamp-output", "merge-stderr-to-stdout",
        "index-argv-by-rank", "s", "preload-binary", "do-not-resolve", "display-map", "display-devel-map",
        "display-topo", "display-diffable-map", "nolocal", "nooversubscribe", "oversubscribe", "bycore", "bynode",
        "byslot", "pernode", "use-hwthread-cpus", "bind-to-core", "bind-to-socket", "report-bindings",
        "display-allocation", "display-devel-allocation", "set-cwd-to-session-dir", "tv", "debug",
        "output-proctable", "d", "debug-devel", "debug-daemons", "debug-daemons-file", "leave-session-attached",
        "do-not-launch", "noprefix", "show-progress", "use-regexp", "enable-recovery", "continuous",
        "disable-recovery", "novm", "allow-run-as-root", "dvm", "fwd-mpirun-port", "enable-instant-on-support"), 0),
}
# Open MPI 5 options Open MPI 4 did not have (a line written for 5 is read too): words they take
OMPI5: Mapping[str, int] = {
    **dict.fromkeys(("output", "display", "runtime-options", "with-ft", "tmpdir", "fwd-signals", "pset",
                     "set-env", "prepend-env", "append-env", "unset-env", "mem-alloc-kind", "gpu-support",
                     "app-prefix", "spawn-timeout", "arch", "file", "output-directory", "initial-errhandler"), 1),
    **dict.fromkeys(("prtemca", "pmixmca", "omca", "gomca"), 2),
    **dict.fromkeys(("fwd-environment", "no-app-prefix", "stop-on-exec", "stop-in-init", "stop-in-app",
                     "do-not-agg-help", "hetero-nodes", "parseable", "parsable", "p", "display-comm",
                     "display-comm-finalize", "soft"), 0),
}
# how Open MPI 5 spells an Open MPI 4 option it does not read as --name
RENAMED: Mapping[str, tuple[str, ...]] = {"rf": ("--rankfile",), "bind-to-socket": ("--bind-to", "package"),
                                          "cf": ("--cartofile",)}
# Open MPI 4 options that only tuned its own runtime or output; Open MPI 5 refuses them: left out
DROPPED = frozenset({"q", "quiet", "d", "debug-devel", "novm", "use-regexp", "fwd-mpirun-port",
                     "enable-instant-on-support", "do-not-resolve", "display-topo", "display-diffable-map",
                     "display-devel-allocation", "index-argv-by-rank"})
# Open MPI 4 options Open MPI 5 does not have at all: the line fails here (validate says so)
MISSING = frozenset({"set-cwd-to-session-dir", "cartofile", "cf", "hnp", "xml-file", "ompi-server", "debugger",
                     "report-events"})
# letters both versions read after one dash, as they are
_LETTERS = frozenset({"h", "V", "v", "s", "c", "n", "x", "H", "N"})
_MCA = frozenset({"mca", "gmca", "omca", "gomca"})
# what simulated nodes must not use, per MCA framework: (components, the name to exclude)
_SHARED = {"btl": (frozenset({"sm", "vader"}), "sm"), "coll": (frozenset({"han"}), "han")}
SHARE_HOST = "DISTCOMP_MPI_NODES_SHARE_HOST"  # set (to 1) where the job's nodes are simulated on one machine


# A record, as a named tuple: this module runs in the mpirun shim before every prterun, where
# importing dataclasses (and inspect, which it imports) would cost each mpirun line ~10 ms.
if TYPE_CHECKING:
    class Line(NamedTuple):
        """An mpirun line: its words, where its (first) program starts, what was changed and what
        could not be read (single-dash words Open MPI 4 does not know; nothing after one is rewritten)."""

        argv: tuple[str, ...]
        program: int  # index of the program in argv (len(argv): none)
        notes: tuple[str, ...] = ()
        unknown: tuple[str, ...] = ()
        missing: tuple[str, ...] = ()  # Open MPI 4 options Open MPI 5 does not have (as written)
else:
    Line = namedtuple("Line", "argv program notes unknown missing", defaults=((), (), ()))


def _name(word: str) -> tuple[str, str] | None:
    """(dashes, name) of an option word, None for a program word."""
    if word.startswith("--") and len(word) > 2:
        return "--", word[2:]
    if word.startswith("-") and len(word) > 1:
        return "-", word[1:]
    return None


def _arity(dashes: str, name: str) -> int | None:
    if "=" in name and dashes == "--":
        return 0  # --name=value: one word
    if name in OMPI4:
        return OMPI4[name]
    return OMPI5.get(name) if dashes == "--" else None


def split(argv: Sequence[str]) -> int:
    """Where the program starts in ``argv`` (``argv[0]`` is mpirun itself); ``len(argv)`` if no
    program, or if an option distcomp cannot read comes first."""
    i = 1
    while i < len(argv):
        parsed = _name(argv[i])
        if parsed is None:
            return i
        arity = _arity(*parsed)
        if arity is None:
            return len(argv)
        i += 1 + arity
    return len(argv)


def openmpi4(argv: Sequence[str]) -> Line:
    """``argv`` with Open MPI 4's single-dash options written as Open MPI 5 reads them."""
    out, notes, unknown, missing = [argv[0]], [], [], []
    i, translated = 1, []
    while i < len(argv):
        word = argv[i]
        if word == ":" or _name(word) is None:  # the program: copy it and its arguments up to the next ':'
            while i < len(argv) and argv[i] != ":":
                out.append(argv[i])
                i += 1
            if i < len(argv):
                out.append(":")
                i += 1
            continue
        dashes, name = _name(word) or ("", "")
        arity = _arity(dashes, name)
        if arity is None:  # unreadable: keep the rest as written
            unknown.append(word)
            out += argv[i:]
            break
        args = list(argv[i + 1:i + 1 + arity])
        if name in MISSING:
            missing.append(word)
        if name in DROPPED:
            notes.append(f"left out {' '.join([word, *args])} (an Open MPI 4 option that Open MPI 5 does not have)")
        elif name in RENAMED:
            out += [*RENAMED[name], *args]
            translated.append(f"{word} -> {' '.join(RENAMED[name])}")
        elif dashes == "-" and name not in _LETTERS:
            out += [f"--{name}", *args]
            translated.append(f"{word} -> --{name}")
        else:
            out += [word, *args]
        i += 1 + arity
    if translated:
        notes.insert(0, "read Open MPI 4's single-dash options as Open MPI 5 spells them: "
                     + ", ".join(dict.fromkeys(translated)))
    rewritten = tuple(out)
    return Line(rewritten, split(rewritten), tuple(notes), tuple(unknown), tuple(missing))


def keep_apart(key: str, value: str) -> str:
    """The MCA ``key`` (``btl``, ``coll``) value ``value`` without what simulated nodes must not use."""
    if key not in _SHARED:
        return value
    banned, exclude = _SHARED[key]
    names = [n.strip() for n in value.lstrip("^").split(",") if n.strip()]
    if value.startswith("^"):
        return value if banned & set(names) else "^" + ",".join([*names, exclude])
    kept = [n for n in names if n not in banned]
    if kept == names:
        return value
    if key == "btl" and "tcp" not in kept:
        kept.append("tcp")  # the other simulated nodes are reached over TCP, as real ones are
    return ",".join(kept)


def apart(argv: Sequence[str], env: Mapping[str, str]) -> tuple[tuple[str, ...], dict[str, str], tuple[str, ...]]:
    """``argv`` and ``env`` with the user's btl and coll choices kept off shared memory between
    simulated nodes (``--mca btl X`` and ``OMPI_MCA_btl``; ``btl_*`` parameters are left alone)."""
    out, new_env, notes = list(argv), dict(env), []
    end = split(out)
    i = 1
    while i < end:
        parsed = _name(out[i])
        arity = _arity(*parsed) if parsed else 0
        if parsed and parsed[1] in _MCA and i + 2 < len(out):
            key, value = out[i + 1], out[i + 2]
            fixed = keep_apart(key, value)
            if fixed != value:
                out[i + 2] = fixed
                notes.append(f"{out[i]} {key} {value} runs as {key} {fixed}: {_why(key)}")
        i += 1 + (arity or 0)
    for key in _SHARED:
        name = f"OMPI_MCA_{key}"
        if name in new_env and (fixed := keep_apart(key, new_env[name])) != new_env[name]:
            notes.append(f"{name}={new_env[name]} runs as {name}={fixed}: {_why(key)}")
            new_env[name] = fixed
    return tuple(out), new_env, tuple(notes)


def _why(key: str) -> str:
    what = "shared memory (btl/sm)" if key == "btl" else "coll/han"
    return f"the simulated nodes share this machine, and {what} across them crashes or hangs Open MPI"


def rewrite(argv: Sequence[str], env: Mapping[str, str]) -> tuple[Line, dict[str, str]]:
    """What distcomp runs for the mpirun line ``argv`` with ``env``: Open MPI 4's options read
    as Open MPI 5's, and, where ``env`` says the nodes share one machine, kept apart."""
    line = openmpi4(argv)
    out_env = dict(env)
    if env.get(SHARE_HOST) == "1":
        argv2, out_env, notes = apart(line.argv, env)
        line = Line(argv2, line.program, (*line.notes, *notes), line.unknown, line.missing)
    return line, out_env


def advice(argv: Sequence[str]) -> list[str]:
    """What ``distcomp validate`` says of an mpirun line: single-dash words it cannot read and
    Open MPI 4 options that Open MPI 5 lacks, each with the exact replacement."""
    line = openmpi4(argv)
    out = []
    for word in line.unknown:
        if word.startswith("--"):
            out.append(f"{argv[0]}: distcomp does not know the option {word!r}, so it leaves the rest of the line "
                       "as written (Open MPI 4's single-dash options after it are not translated); put it last "
                       "among the options")
        else:
            out.append(f"{argv[0]}: {word!r} is not an Open MPI 4 mpirun option, and Open MPI 5 (which runs here) "
                       f"may read it as the program; if it is an option, write '-{word}' (two dashes)")
    for word in line.missing:
        out.append(f"{argv[0]}: {word!r} is an Open MPI 4 option that Open MPI 5 (which runs here) does not have; "
                   "remove it")
    return out
