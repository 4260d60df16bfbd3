"""A stalled job, found and named (``--hang-timeout S``): once the attempt's first heartbeat has
come (``progress``; start-up may be long, so nothing fires before it), no rank beating for S
seconds means the job hangs. Then each Python rank is asked for its stack: the site hook
(``_ranksite/sitecustomize.py``, first on the ranks' PYTHONPATH through ``rank_env``) registered
faulthandler on ``SIGNAL`` to write every thread's stack to ``STACKS_DIR/rankN.stack``, after a
header naming the rank, its pid and its main thread. The supervision loop sends the signal to
the ranks it finds among the job's processes, waits briefly for the files, ends the job as any
failure does and reports a ``Stall``: the ranks that are not inside a collective, with their top
user frame, and where the others wait (``all_reduce``). Standard library only: the node agent
runs it, beside the one supervision loop.
"""

from __future__ import annotations

import os
import re
import signal
import time
from dataclasses import dataclass
from typing import Callable, Iterable, Mapping

from . import progress

# SIGUSR2: free in every launcher distcomp drives. SIGUSR1 is the preemption notice (Slurm's
# --signal=B:USR1, the agent's notice), torchrun's agent handles SIGTERM/SIGINT/SIGHUP/SIGQUIT,
# and Slurm itself sends only SIGTERM/SIGKILL (and what --signal asks). Only processes whose
# header says they registered it get it: its default action would end any other process.
SIGNAL = signal.SIGUSR2
STACKS_ENV = "DISTCOMP_STACKS_DIR"
HOST_ENV = "DISTCOMP_STACKS_HOST"  # the node's name in a rank's header (else the host's): nodes may share a host
FOLDER = "stacks"  # its name in a job's folder
SUFFIX = ".stack"
HEADER = "distcomp stacks:"  # a stack file's first line: "distcomp stacks: rank1 pid 123 main 0x00007f... host NODE"
LEAVING = b"distcomp: exiting\n"  # the last line of a rank's file once its Python ends
SITE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_ranksite")
WAIT = 5.0  # seconds to wait for the stacks after the signal
LOOK = 1.0  # seconds between two reads of the beats

# what a rank waits in: torch.distributed's collectives and point-to-point calls, mpi4py's
# (lower and upper case), tensorflow's collective ops
COLLECTIVES = frozenset({
    "all_reduce", "all_reduce_coalesced", "all_gather", "all_gather_into_tensor", "all_gather_object",
    "all_gather_coalesced", "reduce_scatter", "reduce_scatter_tensor", "broadcast", "broadcast_object_list",
    "reduce", "barrier", "monitored_barrier", "all_to_all", "all_to_all_single", "gather", "gather_object",
    "scatter", "scatter_object_list", "send", "recv", "send_object_list", "recv_object_list", "batch_isend_irecv",
    "allreduce", "Allreduce", "allgather", "Allgather", "Barrier", "bcast", "Bcast", "Reduce", "Gather",
    "Scatter", "alltoall", "Alltoall", "Recv", "Send", "Sendrecv", "sendrecv", "Wait", "Waitall",
    "all_reduce_v2", "collective_reduce_v2", "collective_gather_v2", "collective_bcast_recv_v2",
    "collective_bcast_send_v2", "collective_all_to_all_v2", "batch_all_reduce", "_all_reduce",
})
_LIBRARIES = ("/torch/distributed/", "/mpi4py/", "/tensorflow/", "/horovod/")
_CALL = re.compile(r"\.(" + "|".join(sorted(COLLECTIVES, key=len, reverse=True)) + r")\s*\(")
_FRAME = re.compile(r'\s+File "(?P<file>.*)", line (?P<line>\d+) in (?P<function>.*)')
_THREAD = re.compile(r"(?:Current thread|Thread) (0x[0-9a-f]+)(?: \[.*\])? \(most recent call first\):")
_NOT_USER = ("/site-packages/", "/dist-packages/", "/lib/python3", "<frozen ", "/distcomp/")


ENTRY = "hang_timeout"  # the node record's field: seconds (absent: off)


def entry(timeout: float | None) -> dict[str, float]:
    """The node record's field for a Plan's ``hang_timeout`` (None: off, no field)."""
    return {} if timeout is None else {ENTRY: float(timeout)}


def timeout_of(record: Mapping[str, object]) -> float | None:
    """The hang timeout a record asks for; None when none (or a wrong one: the job still runs)."""
    value = record.get(ENTRY)
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
        return float(value)
    return None


def rank_env(env: Mapping[str, str], stacks: str, beats: str | None = None, host: str | None = None) -> dict[str, str]:
    """``env`` for a rank of a job watched for hangs: the stacks folder, the site hook that
    registers the signal first on its PYTHONPATH (it runs the one it hides), where none is set
    yet the beats folder, and the node's name (``host``) where it is not the host's."""
    out = dict(env)
    out[STACKS_ENV] = stacks
    if host:
        out[HOST_ENV] = host
    if beats is not None:
        out.setdefault(progress.PROGRESS_ENV, beats)
    if os.path.isdir(SITE):  # where the agent travels without it (Ray's package), the MLflow hook's copy registers
        rest = [p for p in out.get("PYTHONPATH", "").split(os.pathsep) if p and p != SITE]
        out["PYTHONPATH"] = os.pathsep.join([SITE, *rest])
    return out


@dataclass(frozen=True)
class Frame:
    file: str
    line: int
    function: str

    def where(self) -> str:
        return f"{self.file}:{self.line} in {self.function}"


@dataclass(frozen=True)
class RankStack:
    """One rank's main thread, innermost frame first; ``collective``: the call it waits in."""

    name: str
    pid: int
    frames: tuple[Frame, ...]
    collective: str | None
    host: str = ""

    @property
    def top(self) -> Frame | None:
        """The innermost frame of the user's code (no library's, no Python's), else the innermost."""
        for f in self.frames:
            if not any(part in f.file for part in _NOT_USER):
                return f
        return self.frames[0] if self.frames else None


@dataclass(frozen=True)
class Stall:
    """What was found when the job stalled: how long no rank beat, each rank's last step, and
    the stacks the ranks gave (``missing``: ranks that beat but gave none)."""

    timeout: float
    quiet: float
    steps: Mapping[str, object]
    stacks: tuple[RankStack, ...]
    missing: tuple[str, ...]
    folder: str

    @property
    def stalled(self) -> tuple[RankStack, ...]:
        """The ranks not inside a collective: the ones to blame."""
        return tuple(s for s in self.stacks if s.collective is None)

    @property
    def blamed(self) -> str:
        """The rank the root cause names: the first not in a collective, else the first seen."""
        if self.stalled:
            return self.stalled[0].name
        return self.stacks[0].name if self.stacks else next(iter(_ordered(self.steps)), "rank0")

    def describe(self) -> str:
        steps = ", ".join(f"{name} step {self.steps[name]}" for name in _ordered(self.steps))
        lines = [f"hung: no rank made progress for {self.quiet:.0f} s (--hang-timeout {self.timeout:g})"
                 + (f"; last steps: {steps}" if steps else "")]
        for s in self.stalled:
            top = s.top
            lines.append(f"{s.name} is not in a collective: " + (top.where() if top else "no Python frame"))
        for s in self.stacks:
            if s.collective is not None:
                top = s.top
                lines.append(f"{s.name} waits in {s.collective}" + (f" ({top.where()})" if top else ""))
        if not self.stacks:
            lines.append("no rank gave its stack (not Python, or its code replaced distcomp's "
                         f"{signal.Signals(SIGNAL).name} handler)")
        elif self.missing:
            lines.append(f"no stack from {', '.join(self.missing)}")
        lines.append(f"every thread's stack: {self.folder}")
        return "\n".join(lines)


def _ordered(names: Iterable[str]) -> list[str]:
    def order(name: str) -> tuple[int, str]:
        return (int(name[4:]), name) if name.startswith("rank") and name[4:].isdigit() else (1 << 30, name)
    return sorted(names, key=order)


def parse(name: str, text: str) -> RankStack | None:
    """A stack file: the main thread's frames of the last dump in it (None: no header or dump)."""
    head, _, body = text.partition("\n")
    fields = head.split()
    if not head.startswith(HEADER) or len(fields) < 7 or not fields[4].isdigit():
        return None
    pid, main, host = int(fields[4]), fields[6].lower(), fields[8] if len(fields) > 8 else ""
    threads: dict[str, list[Frame]] = {}
    current: list[Frame] | None = None
    for line in body.splitlines():  # a thread dumped twice (signalled again): its last dump
        m = _THREAD.match(line.strip())
        if m:
            current = threads[m.group(1).lower()] = []
            continue
        f = _FRAME.match(line)
        if f and current is not None:
            current.append(Frame(f["file"], int(f["line"]), f["function"].strip()))
    if not threads:
        return None
    frames = tuple(threads.get(main) or next(iter(threads.values())))
    return RankStack(name, pid, frames, collective(frames), host)


def collective(frames: Iterable[Frame]) -> str | None:
    """The collective a rank's main thread waits in: a frame of a known library's collective
    (torch.distributed), else the call on the innermost frame's line (mpi4py's are C: no frame)."""
    frames = list(frames)
    for f in frames:
        if f.function in COLLECTIVES and any(lib in f.file for lib in _LIBRARIES):
            return f.function
    for f in frames[:3]:  # the user's line that called into C (comm.Allreduce(...), work.wait())
        m = _CALL.search(_source(f))
        if m:
            return m.group(1)
        if not any(part in f.file for part in _NOT_USER):
            break
    return None


def _source(f: Frame) -> str:
    try:
        with open(f.file, encoding="utf-8", errors="replace") as src:
            for i, line in enumerate(src, 1):
                if i == f.line:
                    return line
    except OSError:
        pass
    return ""


def registered(folder: str, host: str) -> dict[int, str]:
    """{pid: rank name} of every rank of node ``host`` whose stack file says it registered the
    signal (a shared folder holds other nodes' too: their pids mean nothing here)."""
    found: dict[int, str] = {}
    try:
        names = os.listdir(folder)
    except OSError:
        return found
    for name in names:
        if not name.endswith(SUFFIX):
            continue
        try:
            with open(os.path.join(folder, name), encoding="utf-8", errors="replace") as f:
                fields = f.readline().split()
        except OSError:
            continue
        if len(fields) >= 9 and " ".join(fields[:2]) == HEADER and fields[4].isdigit() and fields[8] == host:
            found[int(fields[4])] = name[:-len(SUFFIX)]
    return found


def _leaving(path: str) -> bool:
    """The rank's Python is ending (the site hook's last exit handler ran): its code is done."""
    try:
        with open(path, "rb") as f:
            f.seek(max(0, os.fstat(f.fileno()).st_size - len(LEAVING)))
            return f.read() == LEAVING
    except OSError:
        return False


def _size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return -1


def _dumped(path: str) -> bool:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return "(most recent call first):" in f.read()
    except OSError:
        return False


class Watch:
    """Watches one attempt's beats in ``beats`` for ``timeout`` seconds of silence, and collects
    the ranks' stacks into ``stacks``. ``attempt``: only beats of that attempt count (a shared
    folder may still hold an earlier attempt's)."""

    def __init__(self, timeout: float, beats: str, stacks: str, attempt: str | None = None,
                 wait: float = WAIT, host: str | None = None) -> None:
        self.timeout, self.beats, self.stacks, self.attempt, self.wait = timeout, beats, stacks, attempt, wait
        self.host = host or os.uname().nodename  # this node's name in the ranks' headers (``HOST_ENV``)
        self._looked = 0.0  # time.monotonic() of the last read
        self._last: dict[str, dict[str, object]] = {}
        self.quiet = 0.0
        self.job: set[int] = set()  # the job's processes here when the beats went quiet

    def due(self, job: Callable[[], set[int]], now: float | None = None) -> bool:
        """Whether the job hangs: some rank has beaten, none for ``timeout`` seconds, and one of
        those that beat still runs among ``job``'s processes (this node's): ranks that ended
        (a launcher winding down) or run elsewhere (another node's agent sees to them) are not."""
        mono = time.monotonic()
        if mono - self._looked < LOOK:
            return False
        self._looked = mono
        beats = {name: b for name, b in progress.read(self.beats).items()
                 if self.attempt is None or str(b.get("attempt")) == self.attempt}
        if not beats:
            return False  # no beat yet: start-up (imports, a rendezvous, loading data) may be long
        self._last = beats
        latest = max(float(b["at"]) for b in beats.values())  # type: ignore[arg-type]
        self.quiet = (time.time() if now is None else now) - latest
        if self.quiet < self.timeout:
            return False
        self.job = job()  # the look at /proc: only once the beats went quiet
        leaving = {pid for pid, name in registered(self.stacks, self.host).items() if _leaving(self._path(name))}
        return any(b.get("pid") in self.job and b.get("pid") not in leaving for b in beats.values())

    def dump(self, job: set[int], pause: Callable[[float], None] = time.sleep) -> Stall:
        """Ask every rank among ``job``'s processes for its stack and wait (``pause``) until each
        answered, or ``wait`` seconds; the ranks that beat elsewhere (another node's) are waited
        for in the shared folder as long."""
        asked = {pid: name for pid, name in registered(self.stacks, self.host).items() if pid in job}
        sent = time.time()
        for pid in asked:
            try:
                os.kill(pid, SIGNAL)
            except (ProcessLookupError, PermissionError):
                pass
        expected = set(asked.values()) | set(self._last)
        end = time.monotonic() + self.wait
        sizes: dict[str, int] = {}
        while time.monotonic() < end:
            # done once each has dumped and its file stopped growing: a dump read while the rank
            # still writes it (a busy node, a shared file system) holds only its innermost frames
            now = {name: _size(self._path(name)) for name in expected}
            if now == sizes and all(_dumped(self._path(name)) and self._fresh(name, sent) for name in expected):
                break
            sizes = now
            pause(0.1)
        stacks = []
        for name in _ordered(expected):
            path = self._path(name)
            if not self._fresh(name, sent):
                continue
            try:
                with open(path, encoding="utf-8", errors="replace") as f:
                    found = parse(name, f.read())
            except OSError:
                found = None
            if found is not None:
                stacks.append(found)
        have = {s.name for s in stacks}
        steps = {name: b.get("step") for name, b in self._last.items()}
        return Stall(self.timeout, self.quiet, steps, tuple(stacks),
                     tuple(n for n in _ordered(expected) if n not in have), self.stacks)

    def _path(self, name: str) -> str:
        return os.path.join(self.stacks, name + SUFFIX)

    def _fresh(self, name: str, since: float) -> bool:
        """Written by this stall's signal (a shared folder may keep an earlier attempt's file)."""
        try:
            return os.stat(self._path(name)).st_mtime >= since - 2.0
        except OSError:
            return False


def clear(folder: str) -> None:
    """An earlier attempt's stack files (the local runner's folder is its own)."""
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return
    for entry in entries:
        if entry.name.endswith(SUFFIX) and entry.is_file(follow_symlinks=False):
            try:
                os.unlink(entry.path)
            except OSError:
                pass


def blame(stall: Stall, mine: set[int], first_node: bool, host: str) -> RankStack | None:
    """The rank a node's agent (of node ``host``) reports as the root cause: the first rank
    outside any collective, whichever node runs it (every agent that saw it says the same: the
    first to end need not wait for the others); where every rank was seen inside one (a
    deadlock of collectives), node 0's agent reports its own first rank."""
    if stall.stalled:
        return stall.stalled[0]
    if first_node and not stall.stalled and not stall.missing:  # every rank seen waiting in one
        return next((s for s in stall.stacks if s.host == host and s.pid in mine), None)
    return None
