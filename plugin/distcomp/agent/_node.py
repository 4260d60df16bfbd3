"""Run one node's part of a job: start its replicas, supervise them, report how each ended.

One loop, no threads (as the local target's supervisor): it waits on the replicas' output pipes
and on a wake-up pipe that SIGCHLD, SIGTERM and SIGINT write to. The first replica that fails
ends the node's others (SIGTERM to the node's process group and to every descendant found in
/proc, ``grace`` seconds, then SIGKILL); service replicas (parameter servers) are stopped once
the others have ended well; a SIGTERM to the agent (srun, scancel, a pod's end) stops them all.
Each replica writes ``logs/NAME.log``; each end is reported in ``exits/NAME.json``.
"""

from __future__ import annotations

import json
import os
import re
import selectors
import signal
import socket
import subprocess
import sys
import time
from collections import deque
from typing import IO, Any, Callable, Mapping, Sequence

from . import rankwatch
from .record import COMMAND, RecordError, bind, read, read_secrets, text
from .shared import REDACTED, mask_pattern, write_atomic
from .trust import Untrusted, read_trusted

TAIL = 15  # lines of a replica's output kept for its report
RANK_EXITS = "rank-exits"  # in the job folder: the rank watchers' reports (rankwatch)


class Usage(Exception):
    """A problem with how the agent was started or with its record: exit 2."""


class _Masker:
    """distcomp.base.redact's rule (``shared.mask_pattern``) on the secrets file's needles (they include every form)."""

    def __init__(self, needles: Sequence[str]) -> None:
        self.pattern = mask_pattern(needles)[1]

    def __call__(self, line: str) -> str:
        return self.pattern.sub(REDACTED, line) if self.pattern is not None else line


class _Replica:
    def __init__(self, spec: Mapping[str, Any], argv: list[str], env: dict[str, str], log: IO[bytes],
                 opener: "Callable[[str], IO[bytes]] | None" = None) -> None:
        self.spec = spec
        # a replica hosting several ranks (mpirun --output tag): each tagged line to its rank's log
        prefix = spec.get("rank_prefix")
        self.tag = re.compile(prefix.encode("ascii")) if prefix else None
        self.opener = opener
        self.rank_logs: dict[int, IO[bytes]] = {}
        self.rank_tails: dict[int, deque[str]] = {}  # each tagged rank's last lines
        self.rank_exits = ""  # where its rank watchers report, if they do (``Replica.rank_hooks``)
        self.report: dict[str, Any] | None = None  # the first of its ranks that failed by itself
        self.name: str = spec["name"]
        self.service = bool(spec.get("service"))
        self.argv, self.env, self.log = argv, env, log
        self.popen: subprocess.Popen[bytes] | None = None
        self.tail: deque[str] = deque(maxlen=TAIL)
        self.partial = b""
        self.code: int | None = None
        self.ended: float | None = None
        self.stopped = False  # ended because the agent stopped it (another failed, a signal, a service)
        self.error = ""  # why it could not start

    def feed(self, data: bytes, console: bool) -> None:
        if self.tag is None:
            self.log.write(data)
        lines = (self.partial + data).split(b"\n")
        self.partial = lines.pop()
        if not data and self.partial:  # the end: an unfinished last line counts
            lines.append(self.partial)
            self.partial = b""
        for line in lines:
            name = self.name
            if self.tag is not None:
                line, name = self._route(line)
            decoded = line.decode("utf-8", "replace")
            self.tail.append(decoded)
            if name != self.name and name.startswith("rank"):
                self.rank_tails.setdefault(int(name[4:]), deque(maxlen=TAIL)).append(decoded)
            if console:
                sys.stdout.write(f"[{name}] {decoded}\n")
        if console and lines:
            sys.stdout.flush()

    def _route(self, line: bytes) -> tuple[bytes, str]:
        """A whole line, written to its rank's log (its tag removed) or the replica's own."""
        assert self.tag is not None
        m = self.tag.match(line)
        if m is None or self.opener is None:
            self.log.write(line + b"\n")
            return line, self.name
        rank = int(m.group("rank"))
        if rank not in self.rank_logs:
            self.rank_logs[rank] = self.opener(f"rank{rank}")
        text = line[m.end():]
        self.rank_logs[rank].write(text + b"\n")
        return text, f"rank{rank}"

    def close(self) -> None:
        for log in (self.log, *self.rank_logs.values()):
            log.close()


def _node_index(record: Mapping[str, Any], environ: Mapping[str, str]) -> int:
    for name in record["node_env"]:
        value = environ.get(name, "").strip()
        if value:
            if not value.isdigit() or int(value) >= record["nodes"]:
                raise Usage(f"${name}={value!r} is not a node index of this job (0 to {record['nodes'] - 1})")
            return int(value)
    if record["nodes"] == 1:
        return 0
    raise Usage(f"cannot tell which of the job's {record['nodes']} nodes this is: none of "
                f"{', '.join('$' + n for n in record['node_env']) or '(no node_env in the record)'} is set")


def _values(record: Mapping[str, Any], folder: str, environ: Mapping[str, str]) -> dict[str, str]:
    values = {"job_dir": folder, "restart": "0", "max_restarts": "0", "job_id": record.get("job", "")}
    values.update(record["values"])
    for key, name in record["bind_env"].items():
        if name in environ:
            values[key] = environ[name]
    return values


def _secrets(record: Mapping[str, Any], folder: str) -> tuple[list[str], list[str]]:
    """The secrets by index, and every needle to mask (the same list: each form is one)."""
    if not record.get("secrets"):
        return [], []
    path = os.path.join(folder, record["secrets"])  # a plain name (record.check): a file of this folder
    try:  # a link is refused: it could lead anywhere (../../etc/shadow)
        found = read_secrets(read_trusted(path, "the job's secrets file", secret=True, follow=False))
    except Untrusted as exc:
        raise Usage(str(exc)) from None
    except OSError as exc:
        raise Usage(f"cannot read the job's secrets file {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise Usage(f"the job's secrets file {path} cannot be read ({exc}); give the file distcomp wrote") from None
    return found, found


def _descendants(roots: set[int]) -> set[int]:
    """Every live descendant of ``roots`` (Linux /proc; elsewhere none: the group is all there is)."""
    children: dict[int, list[int]] = {}
    try:
        pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return set()
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                data = f.read()
        except OSError:
            continue
        fields = data[data.rindex(b")") + 2:].split()
        if fields[0] not in (b"Z", b"X"):
            children.setdefault(int(fields[1]), []).append(pid)
    found: set[int] = set()
    todo = list(roots)
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


class Agent:
    def __init__(self, record: dict[str, Any], path: str, environ: Mapping[str, str]) -> None:
        self.record = record
        self.folder = os.path.dirname(os.path.abspath(path))
        self.environ = dict(environ)
        self.node = _node_index(record, environ)
        self.host = next((environ[n] for n in record["node_name_env"] if environ.get(n)), socket.gethostname())
        self.values = _values(record, self.folder, environ)
        self.secrets, needles = _secrets(record, self.folder)
        self.mask = _Masker(needles)
        self.console = bool(record.get("console"))
        self.grace = float(record["grace"])
        self.zero_or_greater = bool(record.get("zero_or_greater"))
        self.mine = [r for r in record["replicas"] if r["node"] == self.node]
        self.replicas: list[_Replica] = []
        self.signals: list[int] = []
        self.selector = selectors.DefaultSelector()
        self.pgid = 0

    # -- setting up -------------------------------------------------------------------------
    def _path(self, name: str) -> str:
        return name if os.path.isabs(name) else os.path.join(self.folder, name)

    def _prepare(self) -> list[tuple[Mapping[str, Any], list[str], dict[str, str]]]:
        """Each replica's argv and env, and the bound files written: every placeholder is bound
        here, before anything starts (a missing value starts nothing)."""
        try:
            files = {name: bind(content, self.values) for name, content in self.record["files"].items()}
            command = [text(word, self.secrets) for word in self.record["command"]]
            common = dict(self.environ)
            for k, v in self.record["defaults"].items():
                common.setdefault(k, v)
            common.update({k: text(v, self.secrets) for k, v in self.record["env"].items()})
            # the platform's variables for the agent's own task (SLURM_PROCID, a pod's RANK) say
            # nothing true of a replica that is one process (a rank, a TF ps): a library reading
            # them would misplace it; a wrapper of several ranks (mpirun) may need them
            task = set(self.record["task_env"])
            single = {k: v for k, v in common.items() if k not in task}
            out = []
            for r in self.mine:
                base = single if r.get("ranks", 1) == 1 else common
                env = {**base, **{k: bind(v, self.values) for k, v in r["env"].items()}}
                env.update(rankwatch.hook_env(r.get("rank_hooks") or (), self._path(RANK_EXITS), env))
                argv: list[str] = []
                for item in r["argv"]:
                    if item == COMMAND:
                        argv.extend(command)
                    else:
                        argv.append(bind(item, self.values))
                out.append((r, argv, env))
        except RecordError as exc:
            raise Usage(f"node {self.node}: {exc} (the record's bind_env names the variable that carries it)") from None
        for name, content in files.items():
            write_atomic(os.path.join(self.folder, name), content)
        return out

    def _open_log(self, name: str) -> IO[bytes]:
        logs = self._path(self.record.get("logs", "logs"))
        os.makedirs(logs, mode=0o700 if self.secrets else 0o777, exist_ok=True)
        return open(os.path.join(logs, f"{name}.log"), "ab", buffering=0)

    def _start(self, spec: Mapping[str, Any], argv: list[str], env: dict[str, str], cwd: str) -> _Replica:
        rep = _Replica(spec, argv, env, self._open_log(spec["name"]), self._open_log)
        self.replicas.append(rep)
        rep.rank_exits = env.get(rankwatch.ENV, "")
        if rep.rank_exits:  # this attempt's reports only
            rankwatch.clear(rep.rank_exits)
        try:
            rep.popen = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                         stderr=subprocess.STDOUT, process_group=self.pgid)
        except OSError as exc:  # a missing program: it failed as a shell would say (127)
            rep.error = f"cannot start {argv[0]!r}: {exc.strerror or exc}"
            rep.feed(f"distcomp agent: {rep.error}\n".encode(), self.console)
            rep.code, rep.ended = 127, time.time()
            return rep
        self.pgid = self.pgid or rep.popen.pid
        assert rep.popen.stdout is not None
        os.set_blocking(rep.popen.stdout.fileno(), False)
        self.selector.register(rep.popen.stdout, selectors.EVENT_READ, rep)
        return rep

    # -- running ------------------------------------------------------------------------------
    def run(self) -> int:
        """Start this node's replicas and supervise them; the agent's exit code."""
        if not self.mine:
            return 0  # another node's replica (mpirun) reaches this one by itself
        prepared = self._prepare()
        cwd = self._path(self.record["cwd"])
        rfd, wfd = os.pipe()
        os.set_blocking(rfd, False)
        os.set_blocking(wfd, False)
        old_fd = signal.set_wakeup_fd(wfd, warn_on_full_buffer=False)
        handlers = {sig: signal.signal(sig, self._on_signal) for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGINT)}
        self.selector.register(rfd, selectors.EVENT_READ, None)
        try:
            for spec, argv, env in prepared:
                if not self.signals:
                    self._start(spec, argv, env, cwd)
            self._watch()
        finally:
            self._stop()
            for sig, old in handlers.items():
                signal.signal(sig, old)
            signal.set_wakeup_fd(old_fd)
            os.close(rfd)
            os.close(wfd)
            for rep in self.replicas:
                rep.close()
                self._report(rep)
                if rep.report is not None:
                    self._report_rank(rep, rep.report)
        failed = [r for r in self.replicas if self._failed(r)]
        blamed = [r.report for r in self.replicas if r.report is not None]
        for report in blamed:
            print(f"distcomp agent: node {self.node}: {rankwatch.describe(report)}", file=sys.stderr, flush=True)
        for rep in failed:  # where no exits/ folder is read (a pod's log), the root cause is said here
            code = rep.code if rep.code is not None and rep.code >= 0 else None
            how = f"exited with code {code}" if code is not None else f"was killed by signal {-(rep.code or 0)}"
            print(f"distcomp agent: node {self.node}: {rep.name} {how}"
                  + (f" ({self.mask(rep.error)})" if rep.error else ""), file=sys.stderr, flush=True)
        if failed or blamed:
            return 1
        return 128 + self.signals[0] if self.signals else 0

    def _on_signal(self, signum: int, frame: object) -> None:
        if signum != signal.SIGCHLD:
            self.signals.append(signum)

    def _failed(self, rep: _Replica) -> bool:
        if rep.stopped or rep.code is None:
            return False
        return rep.code < 0 if self.zero_or_greater else rep.code != 0

    def _watch(self) -> None:
        watched = [r for r in self.replicas if r.rank_exits]
        while True:
            self._pump(0.1 if watched else 1.0)  # a rank watcher's report is a file: looked for often
            for rep in self.replicas:
                if rep.ended is None and rep.popen is not None and rep.popen.poll() is not None:
                    rep.code, rep.ended = rep.popen.returncode, time.time()
            for rep in watched:  # a rank that failed by itself: the job ends now, not when mpirun does
                if rep.ended is None and not self.signals:
                    rep.report = rankwatch.first_failure(rep.rank_exits, self.zero_or_greater)
                    if rep.report is not None:
                        return
            if self.signals:  # what the same signal ended (srun signals the whole step) was stopped
                for rep in self.replicas:
                    if rep.code in (-signal.SIGTERM, -signal.SIGINT, -signal.SIGKILL):
                        rep.stopped = True
                return
            if any(self._failed(r) for r in self.replicas):
                return
            if all(r.ended is not None for r in self.replicas if not r.service) and self._others_done():
                return

    def _others_done(self) -> bool:
        """Whether a service here may stop: every other node's non-service replica has reported
        its end (``exits/`` on a shared folder; a failure there ends the job anyway)."""
        if not any(r.service and r.ended is None for r in self.replicas):
            return True
        exits = self._path(self.record.get("exits", "exits"))
        return all(os.path.exists(os.path.join(exits, f"{r['name']}.json")) for r in self.record["replicas"]
                   if r["node"] != self.node and not r.get("service"))

    def _pump(self, timeout: float) -> None:
        for key, _ in self.selector.select(timeout):
            if key.data is None:  # the wake-up pipe: a signal came
                try:
                    while os.read(key.fd, 512):
                        pass
                except BlockingIOError:
                    pass
                continue
            try:
                data = os.read(key.fd, 65536)
            except BlockingIOError:
                continue
            key.data.feed(data, self.console)
            if not data:
                self.selector.unregister(key.fileobj)
                key.fileobj.close()  # type: ignore[union-attr]

    def _stop(self) -> None:
        """SIGTERM to what still runs (the group, each replica, their descendants), SIGKILL after
        the grace period; then the output left in the pipes."""
        running = [r for r in self.replicas if r.popen is not None and r.popen.poll() is None]
        for rep in running:
            rep.stopped = True
        roots = {r.popen.pid for r in self.replicas if r.popen is not None}
        others = _descendants(roots) - roots

        def send(sig: int) -> None:
            if self.pgid:
                try:
                    os.killpg(self.pgid, sig)
                except (ProcessLookupError, PermissionError):
                    pass
            for pid in (*(r.popen.pid for r in running if r.popen is not None), *others):
                try:
                    os.kill(pid, sig)
                except (ProcessLookupError, PermissionError):
                    pass

        if running or others:
            send(signal.SIGTERM)
            end = time.monotonic() + self.grace
            while time.monotonic() < end and any(r.popen is not None and r.popen.poll() is None for r in running):
                if len(self.signals) > 1:
                    break  # a second signal: no more waiting
                self._pump(0.05)
            others |= _descendants(roots) - roots
            send(signal.SIGKILL)
            others = _descendants(roots) - roots
            if others:
                send(signal.SIGKILL)
        for rep in self.replicas:
            if rep.popen is not None:
                rep.popen.wait()
                if rep.ended is None:
                    rep.code, rep.ended = rep.popen.returncode, time.time()
        end = time.monotonic() + 0.5  # a grandchild that kept a pipe open gets a short while
        while any(k.data is not None for k in self.selector.get_map().values()) and time.monotonic() < end:
            self._pump(0.05)
        for key in list(self.selector.get_map().values()):
            if key.data is not None:
                self.selector.unregister(key.fileobj)
                key.data.feed(b"", self.console)
                key.fileobj.close()  # type: ignore[union-attr]

    # -- reporting ----------------------------------------------------------------------------
    def _report(self, rep: _Replica) -> None:
        """``exits/NAME.json``: how the replica ended, masked (the target's status reads it)."""
        code = rep.code
        spec = rep.spec
        data = {"name": rep.name, "role": spec.get("role", ""), "index": spec.get("index", 0),
                "rank": spec.get("rank"), "node": self.node, "host": self.host,
                "exit_code": code if code is None or code >= 0 else None,
                "signal": -code if code is not None and code < 0 else None,
                "failed": self._failed(rep), "stopped": rep.stopped, "service": rep.service,
                "ended": rep.ended, "pid": rep.popen.pid if rep.popen is not None else None,
                "error": self.mask(rep.error), "tail": [self.mask(line) for line in rep.tail]}
        exits = self._path(self.record.get("exits", "exits"))
        os.makedirs(exits, exist_ok=True)
        write_atomic(os.path.join(exits, f"{rep.name}.json"), json.dumps(data, indent=1) + "\n")


    def _report_rank(self, rep: _Replica, report: Mapping[str, Any]) -> None:
        """``exits/rankN.json`` for the rank ``rep`` hosts that failed by itself (its watcher's
        report): the job's root cause, as a rank of its own would be; ``rep`` itself was stopped."""
        rank = int(report["rank"])
        per_node = max(1, int(self.record.get("world_size") or 1) // int(self.record["nodes"]))
        tail = rep.rank_tails.get(rank) or rep.tail  # a wrapper that does not tag its lines: its own
        data = {"name": f"rank{rank}", "role": "rank", "index": rank, "rank": rank,
                "node": min(rank // per_node, int(self.record["nodes"]) - 1), "host": report.get("host") or self.host,
                "exit_code": report.get("exit_code"), "signal": report.get("signal"), "failed": True,
                "stopped": False, "service": False, "ended": report.get("ended"), "pid": report.get("pid"),
                "error": rankwatch.describe(report), "tail": [self.mask(line) for line in tail]}
        exits = self._path(self.record.get("exits", "exits"))
        os.makedirs(exits, exist_ok=True)
        write_atomic(os.path.join(exits, f"rank{rank}.json"), json.dumps(data, indent=1) + "\n")


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1 or args[0].startswith("-"):
        print("usage: python -m distcomp.agent JOB.json  (the node record distcomp wrote for the job)",
              file=sys.stderr)
        return 2
    try:
        record = read(args[0])
        return Agent(record, args[0], os.environ).run()
    except (RecordError, Usage) as exc:
        print(f"distcomp agent: {exc}", file=sys.stderr)
        return 2
