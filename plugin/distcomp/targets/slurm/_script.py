"""The sbatch script of a job: ``#SBATCH`` lines, the node agent's record, and one node agent
per node (``srun ... python -m distcomp.agent node.json``) that runs that node's replicas.

Pure: it is text for a job folder (``FOLDER/code`` the code snapshot, ``FOLDER/node.json`` the
record, ``FOLDER/logs/NAME.log`` each replica's output, ``FOLDER/exits/NAME.json`` how each
ended), written by ``submit`` and shown by ``compile``. Nothing in it depends on the launcher:
the Plan's Topology is the whole contract (each replica's node, argv and env, with placeholders
for node addresses, node names and ports); the batch step finds those values in the allocation
and hands them to the agents in their environment (``agentjob.bind_names``). The job's secrets
are in neither the script nor the record: the agent reads them from ``FOLDER/secrets.sh``
(``targets._secrets``), the record names each by its index there.

Every job is a long job (issue 36): it asks Slurm for ``--requeue`` and ``--signal=B:USR1@GRACE``
(``--preempt-grace``). The batch script runs the agents' step in a loop of attempts, counted in
the job folder (``_attempts``: the ranks' ``restart_count()``); SIGUSR1 to the batch script (the
time limit or a preemption is near) writes the attempt's notice file, which every node's agent
and rank sees (``runtime.preempted()``); once the step has ended, the job requeues itself
(``scontrol requeue``), keeping its folder, secrets and checkpoint (``JOB_FOLDER/checkpoint``).
A failed attempt with restarts left (``max_restarts``) starts again inside the allocation.
"""

from __future__ import annotations

import math
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Mapping, Sequence, cast

from ...core.agentjob import RECORD, Platform, bind_names, node_record, record_env, to_json
from ...agent.sysmetrics import entry as sysmetrics_entry
from ...agent.hang import entry as hang_entry
from ...errors import JobError, UsageError
from ...base.redact import NONE, Masker
from .._cookie import COOKIE
from .._secrets import NAME as SECRETS

if TYPE_CHECKING:
    from ...delivery.plan import Delivery
    from ...core.plan import Plan
    from ...spec import ComponentSpec

# Slurm's proctrack/linuxproc follows a step's processes by parentage: one a rank started in a
# new session whose parent ended (ppid 1) outlives the job. Every process of the job carries a
# cookie in its environment (as on the local target); when the batch script ends, however it
# ends, one task per node (N tasks on N nodes) stops every process there that carries it
# (SIGTERM, 5 s, SIGKILL).
SWEEP = ('pids=$(grep -lzxF "' + COOKIE + '=$1" /proc/[0-9]*/environ 2>/dev/null '
         '| sed -n "s|^/proc/\\([0-9]*\\)/environ\\$|\\1|p" | grep -vx "$$")\n'
         '[ -n "$pids" ] || exit 0\n'
         'echo "distcomp: node $SLURMD_NODENAME: stopping what the ranks left: pid" $pids >&2\n'
         'kill -TERM $pids 2>/dev/null\n'
         'i=0\n'
         'while [ "$i" -lt 50 ]; do\n'
         '    left=""; for p in $pids; do kill -0 "$p" 2>/dev/null && left="$left $p"; done\n'
         '    [ -n "$left" ] || exit 0\n'
         '    sleep 0.1; i=$((i + 1))\n'
         'done\n'
         'kill -KILL $left 2>/dev/null\n'
         'exit 0')


# The job's secrets file goes when the job has ended by itself: its script ends while Slurm still
# says RUNNING; the ranks' logs are masked with it first (``_forget``). A requeue or a preemption
# (the job PENDING again: this script runs again and reads the file), a cancel or a time limit
# end it otherwise; then distcomp's status or reap does the same once Slurm says the job ended.
# (Bash gives a trap run by a signal the status of the last command, not 128+N: Slurm's word is
# the one to trust.) After the sweep, so a signal that lands while the trap runs keeps the file.
def forget_secrets(python: str) -> str:
    return ('scontrol show job -o "$SLURM_JOB_ID" 2>/dev/null | grep -q " JobState=RUNNING " '
            f'&& {shlex.quote(python)} -m distcomp.targets.slurm._forget "$DISTCOMP_JOB_FOLDER"')


# the last failed attempt's record (``_attempts failed``, started before the script exits): the
# sweep runs meanwhile, and the script ends once both are done (a signal may end a wait early)
RECORDING = "DISTCOMP_RECORDING"
RECORDED = (f'    while [ -n "${{{RECORDING}:-}}" ] && kill -0 "${RECORDING}" 2>/dev/null; do wait "${RECORDING}"; done\n')
# The sweep's step is started with the job (a new step at its end costs Slurm about 0.05 s, more
# on a busy machine, before the job may end): its tasks sweep once their input ends, which this
# script's end brings (it holds the only write end of the pipe: a command of the script that lasts
# closes its copy). Where that step is gone (a lost node) or never started, a new one sweeps.
SWEEPER, SWEEPER_FD = "DISTCOMP_SWEEPER", "DISTCOMP_SWEEPER_FD"
CLOSE_SWEEPER = f"{{{SWEEPER_FD}}}>&-"  # a command's redirection: it holds no write end of the sweep's input


def _sweep_step(script: str, option: str = "") -> str:
    """One task per node that runs ``script``, without the cookie: it must not stop itself."""
    return (f'env -u {COOKIE} -u SLURM_HOSTFILE srun --overlap --kill-on-bad-exit=0{option} '
            '--nodes="$SLURM_JOB_NUM_NODES" --ntasks="$SLURM_JOB_NUM_NODES" \\\n'
            f'      /bin/sh -c {shlex.quote(script)} sweep "${COOKIE}"')


def cleanup(first: str = "", last: str = "") -> str:
    """The batch script's EXIT trap: the sweep on every node (``first``: shell lines the sweep
    runs before it, e.g. a trap that removes the node's code folder when it ends; ``last``: a
    line the batch script runs after the sweep), and the sweep's step, started now."""
    return (f'export {COOKIE}="$SLURM_JOB_ID-$(od -An -N8 -tx8 /dev/urandom | tr -d \' \')"\n'
            'distcomp_cleanup() {\n'
            f'    if [ -n "${{{SWEEPER}:-}}" ] && kill -0 "${SWEEPER}" 2>/dev/null; then  # the sweep\'s step: its input '
            'ends, it sweeps\n'
            f'        exec {{{SWEEPER_FD}}}>&-\n'
            f'        wait "${SWEEPER}" 2>/dev/null || while kill -0 "${SWEEPER}" 2>/dev/null; do sleep 0.05; done  # bash < 5.1: '
            'no wait for it\n'
            '    else\n'
            f'        {_sweep_step(first + SWEEP)}\n'
            '    fi\n'
            + RECORDED
            + (f'    {last}\n' if last else '') +
            '}\n'
            'trap distcomp_cleanup EXIT\n'
            "# the sweep's step, started now (a new one at the end would hold the job's end back): its tasks sweep once "
            "their input ends, as this script exits; the sweep itself carries no cookie: it must not stop itself\n"
            f'exec {{{SWEEPER_FD}}}> >(exec {_sweep_step("cat >/dev/null" + chr(10) + first + SWEEP, " --input=all")})\n'
            f'{SWEEPER}=$!')


CLEANUP = cleanup()
# each node's name and address (NodeAddr, as its slurmd registered it: 127.0.0.1 on the dev
# cluster), for the record's {{node:N}} and {{host:N}}
NODES = ('mapfile -t DISTCOMP_NODES < <(scontrol show hostnames "$SLURM_JOB_NODELIST")\n'
         'for i in "${!DISTCOMP_NODES[@]}"; do\n'
         '    addr=$(scontrol show node "${DISTCOMP_NODES[$i]}" | sed -n \'s/.*NodeAddr=\\([^ ]*\\).*/\\1/p\')\n'
         '    export "DISTCOMP_NODE_$i=${DISTCOMP_NODES[$i]}" "DISTCOMP_HOST_$i=${addr:-${DISTCOMP_NODES[$i]}}"\n'
         'done\n')
# a port nothing listens on at the first node (the batch script runs there), given once per job;
# below Linux's ephemeral range (32768-60999 by default), where any outgoing connection's local
# port may land between this check and the rank's bind (seen under a parallel test run)
NEXT_PORT = ('DISTCOMP_PORTS=" "\n'
             'next_port() {  # sets PORT\n'
             '    local p\n'
             '    while :; do\n'
             '        p=$((20000 + RANDOM % 12768))\n'
             '        [[ $DISTCOMP_PORTS == *" $p "* ]] && continue\n'
             '        (exec 3<>"/dev/tcp/$DISTCOMP_HOST_0/$p") 2>/dev/null || break\n'
             '    done\n'
             '    DISTCOMP_PORTS+="$p "; PORT=$p\n'
             '}\n')
# the agents' step takes every CPU the job has on a node (the fewest, where nodes differ)
CPUS = ("DISTCOMP_CPUS=$(echo \"$SLURM_JOB_CPUS_PER_NODE\" | tr ',' '\\n' | sed 's/(.*//' | sort -n | head -n1)\n")
# Slurm's names for an agent's node; the record's placeholder that Slurm's own variables give
# the agent runs as one srun task per node: its task's variables are not a rank's
TASK_ENV = ("SLURM_PROCID", "SLURM_LOCALID", "SLURM_NTASKS", "SLURM_NPROCS", "SLURM_NTASKS_PER_NODE",
            "SLURM_STEP_NUM_TASKS", "SLURM_STEP_TASKS_PER_NODE", "SLURM_GTIDS")
PLATFORM = dict(node_env=("SLURM_NODEID",), node_name_env=("SLURMD_NODENAME",), bind_env={"job_id": "SLURM_JOB_ID"},
                task_env=TASK_ENV)
HEREDOC = "DISTCOMP_NODE_RECORD"

@dataclass(frozen=True)
class Resources:
    """What the job asks Slurm for, beyond its nodes and tasks."""

    time_minutes: int | None = None
    partition: str | None = None
    account: str | None = None
    gpus_per_node: int | None = None
    mem: str | None = None
    cpus_per_task: int | None = None
    extra: tuple[str, ...] = ()
    preempt_grace: int = 60  # seconds between Slurm's notice (SIGUSR1) and the time limit


def resources_of(spec: "ComponentSpec", options: Mapping[str, object], timeout: float | None) -> Resources:
    """The options, else the spec's resources (``gpu_count``/``gpus``, ``memory``, ``cpu``);
    a deadline in seconds (``timeout``) becomes the time limit when ``time`` is not given."""
    res = spec.resources or {}
    time_opt = options.get("time")
    minutes = int(time_opt) if isinstance(time_opt, int) else None
    if minutes is None and timeout:
        minutes = max(1, math.ceil(timeout / 60))
    gpus = options.get("gpus_per_node")
    if gpus is None:
        for key in ("gpus_per_node", "gpu_count", "gpus", "gpu"):
            if isinstance(res.get(key), int) and not isinstance(res.get(key), bool):
                gpus = res[key]
                break
    mem_flag = "--mem" if options.get("mem") else "the spec's resources.memory"
    mem = options.get("mem") or res.get("memory") or res.get("mem")
    cpus = options.get("cpus_per_task") or res.get("cpus_per_task")
    extra = tuple(str(x) for x in cast("tuple[str, ...]", options.get("sbatch") or ()))
    for line in extra:
        if _CONTROL.search(line) or not line.strip().startswith("-"):
            raise UsageError(f"--sbatch {line!r}: give one sbatch option per flag, as in --sbatch=--qos=high "
                             "(it becomes an #SBATCH line)")
    grace = options.get("preempt_grace")
    return Resources(minutes, _word(options.get("partition"), "--partition", _NAME, _NAME_HINT),
                     _word(options.get("account"), "--account", _NAME, _NAME_HINT),
                     int(gpus) if isinstance(gpus, int) else None, _word(mem, mem_flag, _MEM, _MEM_HINT),
                     int(cpus) if isinstance(cpus, int) else None, extra,
                     int(grace) if isinstance(grace, (int, float)) and not isinstance(grace, bool) else 60)


# A value becomes part of an #SBATCH line, which sbatch reads up to its end: a line break in one
# would start a line of the script itself, so every value has the shape Slurm gives it.
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_NAME = re.compile(r"[A-Za-z0-9_.+-]+(,[A-Za-z0-9_.+-]+)*")
_NAME_HINT = "a Slurm name: letters, digits, '_', '-', '.', '+' (several separated by commas)"
_MEM = re.compile(r"[0-9]+[KMGTkmgt]?")
_MEM_HINT = "a size as sbatch --mem takes it: a number of megabytes, or with a K, M, G or T suffix (16G, 16000M; 0: all)"


def _word(value: object, flag: str, shape: "re.Pattern[str]", hint: str) -> str | None:
    if not value:
        return None
    if not shape.fullmatch(str(value)):
        raise UsageError(f"{flag} {str(value)!r}: expected {hint}")
    return str(value)


def folder_problem(folder: Path) -> str | None:
    """Why the job folder's path cannot be written into the script and sbatch's ``--chdir`` and
    ``--output``, or None. A space is quoted; a line break, a double quote and Slurm's ``%``
    (a file name pattern in ``--output``) cannot be."""
    text = str(folder)
    if _CONTROL.search(text):
        return "holds a control character (a line break, a tab, ...)"
    bad = sorted(set(text) & {'"', "%", "\\"})
    return f"holds {' and '.join(repr(c) for c in bad)}, which sbatch's options cannot carry" if bad else None


def _path(folder: Path, tail: str = "") -> str:
    """A job folder path in an #SBATCH line: sbatch takes a double-quoted value whole."""
    text = f"{folder}{tail}"
    return f'"{text}"' if " " in text else text


def sbatch_lines(name: str, nodes: int, tasks_per_node: int, folder: Path, res: Resources,
                 ntasks: int | None = None) -> list[str]:
    """``ntasks``: the job's tasks where the nodes get different counts (a TF chief and parameter
    servers on the first node), instead of ``tasks_per_node`` on every node."""
    tasks = f"--ntasks={ntasks}" if ntasks else f"--ntasks-per-node={tasks_per_node}"
    lines = [f"--job-name={name}", f"--nodes={nodes}", tasks]
    if res.time_minutes:
        lines.append(f"--time={res.time_minutes}")
    if res.partition:
        lines.append(f"--partition={res.partition}")
    if res.account:
        lines.append(f"--account={res.account}")
    if res.gpus_per_node:
        lines.append(f"--gpus-per-node={res.gpus_per_node}")
    if res.mem:
        lines.append(f"--mem={res.mem}")
    if res.cpus_per_task:
        lines.append(f"--cpus-per-task={res.cpus_per_task}")
    lines += [f"--chdir={_path(folder)}", f"--output={_path(folder, '/slurm-%j.out')}",
              f"--error={_path(folder, '/slurm-%j.out')}",
              # a long job: Slurm may requeue it (a preemption, a lost node; its own after a notice),
              # SIGUSR1 to the batch script GRACE s before the time limit, and each run's output appended
              "--requeue", f"--signal=B:USR1@{res.preempt_grace}", "--open-mode=append"]
    lines += [line.strip() for line in res.extra]
    return ["#SBATCH " + line for line in lines]


def tasks_of(plan: "Plan") -> tuple[int, int | None]:
    """What the job asks Slurm for: tasks per node (the Topology's processes per node), or the
    job's tasks in all (``ntasks``) where one node hosts more replicas than that (a TF chief and
    parameter servers on the first node)."""
    t = plan.topology
    per_node = max(1, t.processes_per_node)
    counts = [sum(r.node == n for r in t.replicas) for n in range(t.nodes)]
    if max(counts) > per_node:
        return per_node, len(t.replicas)
    return per_node, None


def notice_grace(preempt_grace: int) -> float:
    """How long the ranks have from the notice to leave: the grace less the time the job needs
    to stop its step and requeue itself before the time limit (a quarter, at most 10 s)."""
    return max(1.0, preempt_grace - min(10.0, preempt_grace / 4))


def record(plan: "Plan", argv: Sequence[str], env: Mapping[str, str], masker: Masker = NONE,
           cwd: str = "code", preempt_grace: int = 60) -> str:
    """The node agent's record of the job (JSON): the Topology as data, the command and env;
    ``cwd``: where the replicas run (relative: to the job folder); its ``long_job``: the
    checkpoint folder, ``max_restarts`` and the notice (SIGUSR1 only: SIGTERM is Slurm's own
    stop, on a cancel, a requeue or a failed node's step)."""
    from ._attempts import CHECKPOINT

    platform = Platform(values={}, secrets=SECRETS, cwd=cwd, **PLATFORM)  # type: ignore[arg-type]
    try:
        data = node_record(plan.topology, argv, env, platform, job=plan.spec.name, masker=masker,
                           zero_or_greater=plan.spec.successful_return_code == "ZeroOrGreater")
    except ValueError as exc:  # the launcher's Topology: its plugin's to fix
        raise JobError(f"launcher {plan.launcher!r} from {plan.provider}: {exc}") from None
    # an agent whose ranks left on notice exits 0: srun's --kill-on-bad-exit must not cut short
    # another node's ranks still saving; the batch script knows the attempt was preempted
    data["long_job"] = {"checkpoint": CHECKPOINT, "max_restarts": plan.max_restarts, "notice_signals": ["SIGUSR1"],
                        "notice_grace": notice_grace(preempt_grace), "preempted_exit": 0}
    # each agent samples its node (a tracked job), one without a replica (mpirun's) until the job's replicas
    # have ended: exits/ is on the shared job folder
    data.update(sysmetrics_entry(plan.system_metrics_interval, shared=True))
    data.update(hang_entry(plan.hang_timeout))  # each agent watches the job's beats (--hang-timeout)
    return to_json(data)


def attempts(python: str, max_restarts: int, ports: str, step: Sequence[str]) -> list[str]:
    """The batch script's loop of attempts around the agents' ``step`` (its srun lines), with
    the notice trap and the job's own requeue (``_attempts``)."""
    from ._attempts import RESTARTS_LEFT

    tool = f"{shlex.quote(python)} -m distcomp.targets.slurm._attempts"
    return [
        "# the job's attempts (distcomp.targets.slurm._attempts, attempts.json): SIGUSR1 (sbatch --signal: the time",
        "# limit or a preemption is near) writes the attempt's notice file, which every rank sees (runtime.preempted())",
        "# and every node's agent passes on; the ranks leave, the job requeues itself. A failed attempt with restarts",
        f"# left ({max_restarts}) starts again here, every rank on every node.",
        'DISTCOMP_NOTICED=""',
        "distcomp_notice() {",
        "    DISTCOMP_NOTICED=1",
        '    [ -z "${DISTCOMP_NOTICE_FILE:-}" ] || echo "$(date +%s) SIGUSR1 to the batch script (sbatch --signal: the '
        'time limit or a preemption is near)" >>"$DISTCOMP_NOTICE_FILE"',
        "}",
        "trap distcomp_notice USR1",
        "while :; do",
        f'DISTCOMP_ATTEMPT=$({tool} begin "$DISTCOMP_JOB_FOLDER" {max_restarts}) || exit 1',
        'eval "$DISTCOMP_ATTEMPT"  # DISTCOMP_RESTART_COUNT, DISTCOMP_NOTICE_FILE, DISTCOMP_CHECKPOINT_DIR',
        '[ -z "$DISTCOMP_NOTICED" ] || distcomp_notice  # notice came before this attempt started',
        *([ports.rstrip("\n")] if ports else []),
        *step[:-1], f"{step[-1]} {CLOSE_SWEEPER} &",
        "DISTCOMP_STEP=$!",
        '# a trapped signal ends a wait early: wait again until the step has ended, then take its status',
        'while kill -0 "$DISTCOMP_STEP" 2>/dev/null; do wait "$DISTCOMP_STEP"; done',
        'wait "$DISTCOMP_STEP"; DISTCOMP_RC=$?',
        'if [ -e "$DISTCOMP_NOTICE_FILE" ]; then  # preempted: not a failure; the job comes back and resumes',
        f'    {tool} preempted "$DISTCOMP_JOB_FOLDER"',
        '    scontrol requeue "$SLURM_JOB_ID" && exit 0',
        '    echo "distcomp: the job could not requeue itself (scontrol requeue $SLURM_JOB_ID failed): it ends here, its '
        'checkpoint kept" >&2',
        "    exit 143",
        "fi",
        '[ "$DISTCOMP_RC" -ne 0 ] || exit 0',
        "# no restart left: the failure is recorded while the EXIT trap sweeps the nodes (the job ends sooner);",
        "# no process of it ever carries the cookie, which the sweep would stop it by (env -u would, a moment)",
        f'if [ "${{{RESTARTS_LEFT}:-1}}" -eq 0 ]; then',
        f'    (unset {COOKIE}; exec {tool} failed "$DISTCOMP_JOB_FOLDER" "$DISTCOMP_RC") {CLOSE_SWEEPER} &',
        f'    {RECORDING}=$!',
        '    exit "$DISTCOMP_RC"',
        "fi",
        f'{tool} failed "$DISTCOMP_JOB_FOLDER" "$DISTCOMP_RC" || exit "$DISTCOMP_RC"',
        "done",
    ]


def script(plan: "Plan", argv: Sequence[str], folder: Path, name: str, res: Resources,
           env: Mapping[str, str], masker: Masker = NONE, python: str = "python3",
           code: "Delivery | None" = None, node_dir: str | None = None) -> str:
    """The whole sbatch script for the job in ``folder``; ``argv``: the rendered command (each
    value one word), ``env``: variables for every replica (the spec's, the MLflow run's);
    ``python``: the interpreter that runs the node agents (one with distcomp installed);
    ``code``: the code comes through an object store, fetched on every node (``_delivery``),
    not from the job folder's copy, into a folder of the job's own in ``node_dir`` on each node."""
    from ._delivery import cleanup as remove_code
    from ._delivery import fetch_step, node_folder

    spec, t = plan.spec, plan.topology
    local = node_folder(folder, node_dir) if code is not None else None
    per_node, ntasks = tasks_of(plan)
    head = ["#!/bin/bash",
            f"# distcomp: {spec.ref} on Slurm, {t.launcher}, {t.nodes} node(s) x {t.processes_per_node} process(es)",
            f"# job folder: {folder} ({'' if local else 'code/ the code snapshot, '}{RECORD} the node agents' "
            "record, logs/NAME.log, exits/NAME.json)"]
    if plan.own is not None:
        head.append(f"# the command brings its own launcher: {plan.own.describe()}")
    ports = "".join(f"next_port; export DISTCOMP_PORT_{i}=$PORT  # {{{{port:{p}}}}}\n" for i, p in enumerate(t.ports))
    assert all(f"DISTCOMP_PORT_{i}" == bind_names(t)[f"port:{p}"] for i, p in enumerate(t.ports))
    text = record(plan, argv, env, masker, cwd=local or "code", preempt_grace=res.preempt_grace)
    if any(line == HEREDOC for line in text.splitlines()):  # JSON cannot: its lines start with a bracket or space
        raise ValueError("the record holds its own end marker")
    body = head + sbatch_lines(name, t.nodes, per_node, folder, res, ntasks) + [
        "",
        "set -u",
        f"export DISTCOMP_JOB_FOLDER={shlex.quote(str(folder))}  # the job folder",
        'mkdir -p "$DISTCOMP_JOB_FOLDER/logs" "$DISTCOMP_JOB_FOLDER/exits"',
        'cd "$DISTCOMP_JOB_FOLDER"' if local else 'cd "$DISTCOMP_JOB_FOLDER/code"',
        f"# the node agents' record: the replicas, their env and the command (a secret: its index in {SECRETS})",
        f"cat >\"$DISTCOMP_JOB_FOLDER/{RECORD}\" <<'{HEREDOC}'",
        text + HEREDOC,
        "# writable by its owner only, whatever the job's umask: the agents refuse a record others may change",
        f"chmod go-w \"$DISTCOMP_JOB_FOLDER/{RECORD}\"",
        "# what the ranks leave is stopped on every node when this script ends"
        + (" (and the node's code folder removed)" if local else "")
        + (f"; {SECRETS} is removed when the job ended by itself" if masker else ""),
        cleanup(remove_code(local) if local else "", forget_secrets(python) if masker else ""),
        *([fetch_step(code, local, python, t.nodes)] if code is not None and local else []),
        "# the values the agents bind: each node's name and address, the job's ports (fresh for each attempt)",
        NODES + NEXT_PORT + CPUS,
        "# a replica may start steps of its own inside the agents' (mpirun's daemons, through srun)",
        "export SLURM_OVERLAP=1",
        *attempts(python, plan.max_restarts, ports, [
            "# one node agent per node: it starts that node's replicas and reports how each ended",
            f"srun --kill-on-bad-exit=1 --nodes={t.nodes} --ntasks={t.nodes} --cpus-per-task=\"$DISTCOMP_CPUS\" \\",
            f"  {shlex.quote(python)} -m distcomp.agent \"$DISTCOMP_JOB_FOLDER/{RECORD}\""]),
    ]
    return "\n".join(body) + "\n"


ENV_LINE = ' "env": '  # the record's env, one line of it (``agentjob.to_json``)


def bind_env(text: str, env: Mapping[str, str], masker: Masker = NONE) -> str:
    """The script ``text`` with ``env`` (the job's MLflow run's, made when it is submitted) in
    its record's env, over what the spec set: the one line of the script that submit changes."""
    import json

    start = text.index(f"<<'{HEREDOC}'\n")
    end = text.index(f"\n{HEREDOC}\n", start)
    lines = text[start:end].split("\n")
    (at,) = [i for i, line in enumerate(lines) if line.startswith(ENV_LINE)]
    line = lines[at]
    comma = "," if line.endswith(",") else ""
    have = json.loads(line[len(ENV_LINE):len(line) - len(comma)])
    lines[at] = ENV_LINE + json.dumps({**have, **record_env(env, masker)}) + comma
    return text[:start] + "\n".join(lines) + text[end:]
