"""Run one node's part of a job: start its replicas, supervise them, report how each ended.

The supervision is ``supervise``'s loop, the one the local target runs its ranks with: the first
replica that fails ends the node's others (SIGTERM to the node's process group and to every
descendant found in /proc, ``grace`` seconds, then SIGKILL); service replicas (parameter servers)
are stopped once every other replica of the job has ended well; a SIGTERM to the agent (srun,
scancel, a pod's end) stops them all. Each replica writes ``logs/NAME.log`` (``output``); each
end is reported in ``exits/NAME.json``.

A long job (the record's ``long_job``: its checkpoint folder, ``max_restarts``, the notice's
signals and grace) gives its replicas the long-job contract (``longjob``): the attempt is
``$DISTCOMP_RESTART_COUNT`` as the platform set it for this agent (Slurm's batch script, a pod's
counting line), bound into ``{{restart}}`` too; a notice signal (Slurm's SIGUSR1; not SIGTERM
there, which is Slurm's own stop) is a preemption: the ranks see ``runtime.preempted()`` and get
the grace to save and leave. The notice is a file on the job's shared folder: an agent that sees
the attempt's notice file appear (the batch script wrote it on another node) gives itself the
notice signal, so every node's ranks hear of it, however the platform signals.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import sys
import threading
from dataclasses import dataclass
from typing import IO, Any, ContextManager, Mapping, Sequence

from . import longjob, rankwatch
from . import sysmetrics
from . import _nodehang
from .output import Output
from .record import COMMAND, RecordError, bind, read, read_secrets, text
from .shared import REDACTED, mask_pattern, write_atomic
from .supervise import Ended, Notice, Start, supervise
from .trust import Untrusted, read_trusted

RANK_EXITS = "rank-exits"  # in the job folder: the rank watchers' reports (rankwatch)


class Usage(Exception):
    """A problem with how the agent was started or with its record: exit 2."""


class _Masker:
    """distcomp.base.redact's rule (``shared.mask_pattern``) on the secrets file's needles (they include every form)."""

    def __init__(self, needles: Sequence[str]) -> None:
        self.pattern = mask_pattern(needles)[1]

    def __call__(self, line: str) -> str:
        return self.pattern.sub(REDACTED, line) if self.pattern is not None else line


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


@dataclass(frozen=True)
class LongJob:
    """What a long job's replicas get (``longjob.long_job_env``) and how its notice comes."""

    env: Mapping[str, str]
    notice: str  # this attempt's notice file
    signals: tuple[int, ...]
    grace: float
    preempted_exit: int  # the agent's exit code when the attempt was preempted


def _attempt(values: Mapping[str, str], environ: Mapping[str, str]) -> int:
    """The attempt as the platform counted it ($DISTCOMP_RESTART_COUNT), else the record's."""
    for given in (environ.get(longjob.RESTART_ENV, ""), values.get("restart", "")):
        if given.strip().isdigit():
            return int(given)
    return 0


def _long_job(record: Mapping[str, Any], folder: str, environ: Mapping[str, str], attempt: int) -> LongJob | None:
    spec = record.get("long_job")
    if not isinstance(spec, dict):
        return None
    checkpoint = environ.get(longjob.CHECKPOINT_ENV) or str(spec.get("checkpoint") or "checkpoint")
    checkpoint = checkpoint if os.path.isabs(checkpoint) else os.path.join(folder, checkpoint)
    env = longjob.long_job_env(checkpoint, folder, attempt, int(spec.get("max_restarts") or 0))
    try:
        signals = tuple(int(getattr(signal, name)) for name in spec.get("notice_signals") or ())
    except AttributeError as exc:
        raise Usage(f"the record's long_job names an unknown signal ({exc})") from None
    return LongJob(env, env[longjob.NOTICE_ENV], signals, float(spec.get("notice_grace") or 0.0),
                   int(spec.get("preempted_exit", longjob.PREEMPTED_EXIT)))


def _ignore(signum: int, frame: object) -> None:
    """A notice signal outside the supervision: nothing to stop yet (the default would end the agent)."""


class _NoticeWatch:
    """Gives this agent the notice signal once the attempt's notice file exists, while
    ``supervise`` handles it: another node's batch script or agent may have given the notice."""

    def __init__(self, path: str, signum: int) -> None:
        self.path, self.signum = path, signum
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="distcomp-notice", daemon=True)
        self.previous: Any = None

    def _run(self) -> None:
        while not self.stop.wait(0.25):
            if os.path.exists(self.path) and signal.getsignal(self.signum) is not _ignore:
                os.kill(os.getpid(), self.signum)
                return

    def __enter__(self) -> "_NoticeWatch":
        self.previous = signal.signal(self.signum, _ignore)
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()
        signal.signal(self.signum, self.previous)


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


class Agent:
    def __init__(self, record: dict[str, Any], path: str, environ: Mapping[str, str]) -> None:
        self.record = record
        self.folder = os.path.dirname(os.path.abspath(path))
        self.environ = dict(environ)
        self.node = _node_index(record, environ)
        self.host = next((environ[n] for n in record["node_name_env"] if environ.get(n)), socket.gethostname())
        self.values = _values(record, self.folder, environ)
        attempt = _attempt(self.values, environ)
        self.values["restart"] = str(attempt)
        self.long_job = _long_job(record, self.folder, environ, attempt)
        if self.long_job is not None:
            self.values["max_restarts"] = self.long_job.env[longjob.MAX_RESTARTS_ENV]
        self.secrets, needles = _secrets(record, self.folder)
        self.mask = _Masker(needles)
        self.console = bool(record.get("console"))
        self.grace = float(record["grace"])
        self.zero_or_greater = bool(record.get("zero_or_greater"))
        self.mine = [r for r in record["replicas"] if r["node"] == self.node]
        self.hang = _nodehang.watch(record, self.folder, environ, attempt, self.host)  # None: not watched for hangs

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
            if self.long_job is not None:
                common.update(self.long_job.env)
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
                out.append((r, argv, _nodehang.rank_env(self.hang, env)))
        except RecordError as exc:
            raise Usage(f"node {self.node}: {exc} (the record's bind_env names the variable that carries it)") from None
        for name, content in files.items():
            write_atomic(os.path.join(self.folder, name), content)
        return out

    def _open_log(self, name: str) -> IO[bytes]:
        logs = self._path(self.record.get("logs", "logs"))
        os.makedirs(logs, mode=0o700 if self.secrets else 0o777, exist_ok=True)
        return open(os.path.join(logs, f"{name}.log"), "ab", buffering=0)

    # -- running ------------------------------------------------------------------------------
    def run(self) -> int:
        """Start this node's replicas and supervise them; the agent's exit code."""
        if not self.mine:  # another node's replica (mpirun) reaches this one by itself
            return self._sample_only()
        prepared = self._prepare()
        cwd = self._path(self.record["cwd"])
        outputs = [Output(spec["name"], self._open_log(spec["name"]), spec.get("rank_prefix"), self._open_log,
                          self.console) for spec, _argv, _env in prepared]
        errors: dict[int, str] = {}

        def start_failed(i: int, exc: OSError) -> None:
            errors[i] = f"cannot start {prepared[i][1][0]!r}: {exc.strerror or exc}"
            outputs[i].feed(f"distcomp agent: {errors[i]}\n".encode())

        starts = [Start(spec["name"], argv, env, cwd, out, bool(spec.get("service")))
                  for (spec, argv, env), out in zip(prepared, outputs)]
        long_job, notice = self.long_job, None
        watch: ContextManager[object] = contextlib.nullcontext()
        if long_job is not None and long_job.signals:
            path, where = long_job.notice, f"node {self.node} ({self.host})"
            notice = Notice(long_job.signals, lambda why: longjob.give_notice(path, f"{why} to the node agent on {where}"),
                            long_job.grace)
            watch = _NoticeWatch(path, long_job.signals[0])
        sampler = self._sampler()  # this node's system metrics, while its replicas run
        try:
            with watch:
                done = supervise(starts, self.grace, zero_or_greater=self.zero_or_greater, start_failed=start_failed,
                                 services_may_stop=self._others_done, notice=notice, hang=self.hang)
        finally:
            if sampler is not None:
                sampler.stop()
            for out in outputs:
                out.close()
        preempted = done.outcome == "preempted"  # whatever ended on notice left as asked: no failure
        if preempted and long_job is not None:
            print(f"distcomp agent: node {self.node}: preempted: the ranks had notice ({long_job.notice}) "
                  f"and {long_job.grace:g} s to save and leave", file=sys.stderr, flush=True)
        failed, blamed = [], []
        for i, ((spec, _argv, _env), p) in enumerate(zip(prepared, done.processes)):
            # what the agent's own signal also ended (srun signals the whole step) was stopped, not failed
            stopped = preempted or p.stopped or (
                bool(done.signals) and p.code in (-signal.SIGTERM, -signal.SIGINT, -signal.SIGKILL))
            bad = not stopped and p.code is not None and (p.code < 0 if self.zero_or_greater else p.code != 0)
            if bad:
                failed.append((p, errors.get(i, "")))
            self._report(spec, p, outputs[i], stopped, bad, errors.get(i, ""))
            if p.report is not None:
                self._report_rank(outputs[i], p.report)
                blamed.append(p.report)
        if done.stall is not None and self.hang is not None:  # hung: every replica here was stopped
            per_node = max(1, int(self.record.get("world_size") or 1) // int(self.record["nodes"]))
            _nodehang.report(done.stall, self.hang.job, self.node, self.host, self._path(self.record.get("exits", "exits")),
                             per_node, lambda name: self._tail(outputs, name), self.mask)
            return 1
        for report in blamed:
            print(f"distcomp agent: node {self.node}: {rankwatch.describe(report)}", file=sys.stderr, flush=True)
        for p, error in failed:  # where no exits/ folder is read (a pod's log), the root cause is said here
            code = p.code if p.code is not None and p.code >= 0 else None
            how = f"exited with code {code}" if code is not None else f"was killed by signal {-(p.code or 0)}"
            print(f"distcomp agent: node {self.node}: {p.name} {how}"
                  + (f" ({self.mask(error)})" if error else ""), file=sys.stderr, flush=True)
        if failed or blamed:
            return 1
        if preempted and long_job is not None:
            return long_job.preempted_exit
        return 128 + done.signals[0] if done.signals else 0

    def _sample_only(self) -> int:
        """A node without a replica samples its node (where its ranks run, started from another
        node) until every replica has ended, where the record says their ends are seen here."""
        sampler = self._sampler() if sysmetrics.waits(self.record) else None
        if sampler is not None:
            sysmetrics.until_ended(self._path(self.record.get("exits", "exits")),
                                   [r["name"] for r in self.record["replicas"] if not r.get("service")])
            sampler.stop()
        return 0

    def _sampler(self) -> sysmetrics.Sampler | None:
        """The node's system-metrics monitor, with the ranks' MLflow env (the record's, secrets
        resolved), where the record asks for one and the job is tracked (``sysmetrics``)."""
        if sysmetrics.interval_of(self.record) is None:
            return None
        env = {**self.environ, **{k: text(v, self.secrets) for k, v in self.record["env"].items()}}

        def say(line: str) -> None:
            print(f"distcomp agent: node {self.node}: {self.mask(line)}", file=sys.stderr, flush=True)

        # its log beside the ranks' logs/, not in it: logs/ holds the ranks' (distcomp logs shows them)
        return sysmetrics.start(self.record, env, self.host, self._path(sysmetrics.LOGS), say)

    @staticmethod
    def _tail(outputs: Sequence[Output], name: str) -> list[str]:
        """A rank's last lines: its own replica's, else those a wrapper (torchrun) tagged as it."""
        for out in outputs:
            if out.name == name:
                return list(out.tail)
        rank = int(name[4:]) if name[4:].isdigit() else -1
        return next((list(out.rank_tails[rank]) for out in outputs if rank in out.rank_tails), [])

    def _others_done(self) -> bool:
        """Whether a service here may stop: every other node's non-service replica has reported
        its end (``exits/`` on a shared folder; a failure there ends the job anyway)."""
        exits = self._path(self.record.get("exits", "exits"))
        return all(os.path.exists(os.path.join(exits, f"{r['name']}.json")) for r in self.record["replicas"]
                   if r["node"] != self.node and not r.get("service"))

    # -- reporting ----------------------------------------------------------------------------
    def _report(self, spec: Mapping[str, Any], p: Ended, out: Output, stopped: bool, failed: bool,
                error: str) -> None:
        """``exits/NAME.json``: how the replica ended, masked (the target's status reads it)."""
        code = p.code
        data = {"name": p.name, "role": spec.get("role", ""), "index": spec.get("index", 0),
                "rank": spec.get("rank"), "node": self.node, "host": self.host,
                "exit_code": code if code is None or code >= 0 else None,
                "signal": -code if code is not None and code < 0 else None,
                "failed": failed, "stopped": stopped, "service": bool(spec.get("service")),
                "ended": p.ended, "pid": p.pid, "error": self.mask(error), "tail": [self.mask(line) for line in out.tail]}
        exits = self._path(self.record.get("exits", "exits"))
        os.makedirs(exits, exist_ok=True)
        write_atomic(os.path.join(exits, f"{p.name}.json"), json.dumps(data, indent=1) + "\n")

    def _report_rank(self, rep: Output, report: Mapping[str, Any]) -> None:
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
