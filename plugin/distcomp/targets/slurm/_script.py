"""The sbatch script of a job: ``#SBATCH`` lines, then one launch per launcher contract.

Pure: it is text for a job folder (``FOLDER/code`` the code snapshot, ``FOLDER/logs`` the
ranks' logs, ``FOLDER/exits`` one line per rank that ended), written by ``submit`` and shown
by ``compile``. Each rank is wrapped in a small ``sh -c`` that sets its launcher's env from
Slurm's task variables, sends its output to its own log and records its exit code, so the
first failing rank can be named after Slurm has killed the others (``--kill-on-bad-exit``).
The job's secrets are not in it: it reads them from ``FOLDER/secrets.sh`` (``targets._secrets``).
"""

from __future__ import annotations

import math
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Mapping, Sequence, cast

from ...errors import UsageError
from ...redact import NONE, Masker
from .._secrets import NAME as SECRETS, shell_line, shell_word
from .._cookie import COOKIE

if TYPE_CHECKING:
    from ...spec import ComponentSpec

TORCH_LIKE = ("torch.distributed", "deepspeed")
MPI = "mpi"
TENSORFLOW = "tensorflow.distributed"
# the first node's address, as its slurmd registered it (NodeAddr: 127.0.0.1 on the dev cluster)
FIRST_NODE = ('MASTER_NODE=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n1)\n'
              'MASTER_ADDR=$(scontrol show node "$MASTER_NODE" | sed -n \'s/.*NodeAddr=\\([^ ]*\\).*/\\1/p\')\n'
              'export MASTER_ADDR=${MASTER_ADDR:-$MASTER_NODE}\n')
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
CLEANUP = (f'export {COOKIE}="$SLURM_JOB_ID-$(od -An -N8 -tx8 /dev/urandom | tr -d \' \')"\n'
           'distcomp_cleanup() {  # the sweep itself carries no cookie: it must not stop itself\n'
           f'    env -u {COOKIE} -u SLURM_HOSTFILE srun --overlap --kill-on-bad-exit=0 '
           '--nodes="$SLURM_JOB_NUM_NODES" --ntasks="$SLURM_JOB_NUM_NODES" \\\n'
           f'      /bin/sh -c {shlex.quote(SWEEP)} sweep "${COOKIE}"\n'
           '}\n'
           'trap distcomp_cleanup EXIT')
# a port nothing listens on at the first node (the batch script runs there)
FREE_PORT = ('free_port() {\n'
             '    local p\n'
             '    while :; do\n'
             '        p=$((20000 + RANDOM % 30000))\n'
             '        (exec 3<>"/dev/tcp/$MASTER_ADDR/$p") 2>/dev/null || { echo "$p"; return; }\n'
             '    done\n'
             '}\n')


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
    return Resources(minutes, _word(options.get("partition"), "--partition", _NAME, _NAME_HINT),
                     _word(options.get("account"), "--account", _NAME, _NAME_HINT),
                     int(gpus) if isinstance(gpus, int) else None, _word(mem, mem_flag, _MEM, _MEM_HINT),
                     int(cpus) if isinstance(cpus, int) else None, extra)


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


def _q(value: str) -> str:
    return shlex.quote(value)


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
              f"--error={_path(folder, '/slurm-%j.out')}"]
    lines += [line.strip() for line in res.extra]
    return ["#SBATCH " + line for line in lines]


def rank_wrapper(env: Mapping[str, str], rank_var: str, node_var: str = "$SLURMD_NODENAME") -> str:
    """``/bin/sh -c BODY rank``: a rank's env (values may name ``$SLURM_*``), its own log, its
    exit code recorded as ``CODE NODE TIME`` in ``$DISTCOMP_JOB_FOLDER/exits/rankN``; then ``"$@"`` runs."""
    exports = "".join(f"export {k}={v}\n" for k, v in env.items())
    body = (f"{exports}"
            f'exec >"$DISTCOMP_JOB_FOLDER/logs/rank{rank_var}.log" 2>&1\n'
            '"$@"\n'
            "code=$?\n"
            f'echo "$code {node_var} $(date +%s.%N)" >"$DISTCOMP_JOB_FOLDER/exits/rank{rank_var}"\n'
            'exit "$code"')
    return "/bin/sh -c " + _q(body) + " rank"


def torch_env(nodes: int, per_node: int, folder: Path) -> dict[str, str]:
    """torchrun's worker env (``launchers.torch.torch_env``), per task from Slurm's variables."""
    from ...launchers.torch import torch_env as base
    from ...records import bind

    static = base(0, 0, 0, nodes, per_node)
    dynamic = {"RANK": '"$SLURM_PROCID"', "LOCAL_RANK": '"$SLURM_LOCALID"', "WORLD_SIZE": '"$SLURM_NTASKS"',
               "NODE_RANK": '"$SLURM_NODEID"', "GROUP_RANK": '"$SLURM_NODEID"', "ROLE_RANK": '"$SLURM_PROCID"',
               "TORCHELASTIC_RUN_ID": '"$SLURM_JOB_ID"',
               "TORCHELASTIC_ERROR_FILE": '"$DISTCOMP_JOB_FOLDER/errors/rank$SLURM_PROCID.error.json"'}
    values = {"job_dir": str(folder), "job_id": "0", "restart": "0", "max_restarts": "0",
              "host:0": "127.0.0.1", "port:master": "0"}
    # MASTER_ADDR and MASTER_PORT come from the batch step's env, exported before srun
    env = {k: dynamic.get(k) or _q(bind(v, values)) for k, v in static.items() if k not in ("MASTER_ADDR", "MASTER_PORT")}
    if nodes * per_node > 1:
        env["OMP_NUM_THREADS"] = '"${OMP_NUM_THREADS:-1}"'  # torchrun's default when ranks share a node
    return env


def script(spec: "ComponentSpec", argv: Sequence[str], folder: Path, name: str, res: Resources,
           env: Mapping[str, str], masker: Masker = NONE) -> str:
    """The whole sbatch script for the job in ``folder``; ``argv``: the rendered command (each
    value one word), ``env``: variables for every rank (the spec's, the MLflow run's); each text
    ``masker`` masks is a reference to ``FOLDER/secrets.sh``, which the script reads."""
    from ...launchers.own import find

    d = spec.distribution
    nodes, per_node = d.nodes, d.processes_per_node or 1
    launcher = d.launcher
    own = find(spec)
    ntasks: int | None = None
    command = shell_line(list(argv), masker)
    head = ["#!/bin/bash",
            f"# distcomp: {spec.ref} on Slurm, {launcher}, {nodes} node(s) x {per_node} process(es)",
            f"# job folder: {folder} (code/ the code snapshot, logs/rankN.log, exits/rankN)"]
    if own is not None:
        head.append(f"# the command brings its own launcher: {own.describe()}")
        launch, tasks = _own(own.once, nodes, per_node, command, folder)
    elif launcher in TORCH_LIKE:
        launch, tasks = _torch(nodes, per_node, command, folder), per_node
    elif launcher == MPI:
        launch, tasks = _mpi(spec, nodes, per_node, command, folder), per_node
    elif launcher == TENSORFLOW:
        launch, tasks, ntasks = _tensorflow(spec, command)
    else:
        raise UsageError(f"the slurm target runs torch.distributed, deepspeed, mpi and tensorflow.distributed "
                         f"jobs; {spec.ref} uses {launcher}")
    body = head + sbatch_lines(name, nodes, tasks, folder, res, ntasks) + [
        "",
        "set -u",
        f"export DISTCOMP_JOB_FOLDER={_q(str(folder))}  # the job folder",
        'mkdir -p "$DISTCOMP_JOB_FOLDER/logs" "$DISTCOMP_JOB_FOLDER/exits" "$DISTCOMP_JOB_FOLDER/errors"',
        'cd "$DISTCOMP_JOB_FOLDER/code"',
    ]
    if masker:  # its secrets, from a file only its owner reads; not exported: the ranks' env lacks them
        body.append(f'. "$DISTCOMP_JOB_FOLDER/{SECRETS}"  # DISTCOMP_SECRET_N: the job\'s secrets (mode 600)')
    body += [f"export {k}={shell_word(v, masker)}" for k, v in env.items()]
    body += ["# what the ranks leave is stopped on every node when this script ends", CLEANUP]
    return "\n".join(body) + "\n" + launch


def _torch(nodes: int, per_node: int, command: str, folder: Path) -> str:
    """One srun task per rank; torchrun's env from Slurm's (rank, local rank, node)."""
    wrapper = rank_wrapper(torch_env(nodes, per_node, folder), "$SLURM_PROCID")
    return (f"# torch.distributed: one srun task per rank, torchrun's env from Slurm's\n"
            f"{FIRST_NODE}{FREE_PORT}export MASTER_PORT=$(free_port)\n"
            f"srun --kill-on-bad-exit=1 --ntasks={nodes * per_node} --ntasks-per-node={per_node} \\\n"
            f"  {wrapper} \\\n  {command}\n")


def _hostfile(folder: Path) -> str:
    return ('export AZUREML_MPI_HOSTFILE="$DISTCOMP_JOB_FOLDER/hostfile"\n'
            'scontrol show hostnames "$SLURM_JOB_NODELIST" | sed "s/\\$/ slots=$SLURM_NTASKS_PER_NODE/" '
            '>"$AZUREML_MPI_HOSTFILE"\n'
            
            f"{FIRST_NODE}{FREE_PORT}export AZ_BATCH_MASTER_NODE=$MASTER_ADDR:$(free_port)\n")


def _mpi(spec: "ComponentSpec", nodes: int, per_node: int, command: str, folder: Path) -> str:
    """mpirun once in the batch step over the allocation's nodes and slots."""
    forward = sorted({"AZUREML_MPI_HOSTFILE", "AZ_BATCH_MASTER_NODE", *spec.environment_variables})
    xs = " ".join(f"-x {name}" for name in forward)
    wrapper = rank_wrapper({}, "$OMPI_COMM_WORLD_RANK")
    return ("# mpi: mpirun once, over a hostfile of the allocation's nodes and slots\n"
            f"{_hostfile(folder)}"
            f"mpirun --allow-run-as-root --hostfile \"$AZUREML_MPI_HOSTFILE\" -np {nodes * per_node} "
            f"--map-by slot {xs} \\\n  {wrapper} \\\n  {command}\n")


def _own(once: bool, nodes: int, per_node: int, command: str, folder: Path) -> tuple[str, int]:
    """The command's own launcher: mpirun-style once in the batch step, torchrun-style once per node."""
    if once:
        return ("# the command's own mpirun, once in the batch step (AZUREML_MPI_HOSTFILE lists the nodes)\n"
                f"{_hostfile(folder)}"
                "export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1\n"
                'export PRTE_MCA_prte_default_hostfile="$AZUREML_MPI_HOSTFILE"\n'
                f"{command}\n"), per_node
    env = {"NODE_RANK": '"$SLURM_NODEID"', "MASTER_ADDR": '"$MASTER_ADDR"', "MASTER_PORT": '"$MASTER_PORT"'}
    wrapper = rank_wrapper(env, "$SLURM_NODEID")
    return ("# the command's own launcher, once per node (NODE_RANK, MASTER_ADDR, MASTER_PORT)\n"
            f"{FIRST_NODE}{FREE_PORT}export MASTER_PORT=$(free_port)\n"
            f"srun --kill-on-bad-exit=1 --ntasks={nodes} --ntasks-per-node=1 \\\n"
            f"  {wrapper} \\\n  {command}\n"), 1


# a task's TF_CONFIG, built in the task from its SLURM_PROCID: its line of DISTCOMP_TF_TASKS
# (ROLE:INDEX:NODE) and the cluster the batch step wrote (every task's NodeAddr:PORT)
_TF_CONFIG = ('task=$(echo "$DISTCOMP_TF_TASKS" | cut -d" " -f$((SLURM_PROCID + 1)))\n'
              'role=${task%%:*}; rest=${task#*:}; index=${rest%%:*}\n'
              'export TF_CONFIG="{\\"cluster\\": $DISTCOMP_TF_CLUSTER, '
              '\\"task\\": {\\"type\\": \\"$role\\", \\"index\\": $index}}"\n')
# a parameter server or evaluator serves the others: once every chief/worker task has an exit
# record (they all ended well: a failure ends the step first), it is stopped and counts as done
_TF_TASK = (_TF_CONFIG
            + 'exec >"$DISTCOMP_JOB_FOLDER/logs/rank$SLURM_PROCID.log" 2>&1\n'
            'if [ "$SLURM_PROCID" -lt "$DISTCOMP_TF_MAIN" ]; then\n'
            '    "$@"; code=$?\n'
            'else\n'
            '    "$@" & pid=$!\n'
            '    while kill -0 "$pid" 2>/dev/null; do\n'
            '        i=0; while [ "$i" -lt "$DISTCOMP_TF_MAIN" ] && [ -e "$DISTCOMP_JOB_FOLDER/exits/rank$i" ]; do i=$((i + 1)); done\n'
            '        if [ "$i" -eq "$DISTCOMP_TF_MAIN" ]; then kill "$pid"; wait "$pid"; exit_ok=1; break; fi\n'
            '        sleep 0.5\n'
            '    done\n'
            '    wait "$pid"; code=$?\n'
            '    [ "${exit_ok:-0}" = 1 ] && code=0\n'
            'fi\n'
            'echo "$code $SLURMD_NODENAME $(date +%s.%N)" >"$DISTCOMP_JOB_FOLDER/exits/rank$SLURM_PROCID"\n'
            'exit "$code"')


def _tensorflow(spec: "ComponentSpec", command: str) -> tuple[str, int, int | None]:
    """One srun task per TF task, placed as the tensorflow launcher lays them out (workers fill
    the nodes in order; chief, parameter servers and evaluator on the first node) through
    SLURM_HOSTFILE; the batch step picks each task's address (its node's NodeAddr) and a free
    port, each task builds its TF_CONFIG from its SLURM_PROCID."""
    from ...launchers.tensorflow import tf_topology

    nodes = spec.distribution.nodes
    replicas = sorted(tf_topology(spec).replicas, key=lambda r: r.service)  # services last
    main = sum(not r.service for r in replicas)
    counts = {sum(r.node == n for r in replicas) for n in range(nodes)}
    uneven = len(replicas) if len(counts) > 1 else None  # then the job asks for its tasks in all
    layout = " ".join(f"{r.role}:{r.index}:{r.node}" for r in replicas)
    return ("# tensorflow.distributed: one srun task per TF task (ROLE:INDEX:NODE), TF_CONFIG built in each\n"
            f"export DISTCOMP_TF_TASKS={_q(layout)} DISTCOMP_TF_MAIN={main}\n"
            'mapfile -t NODES < <(scontrol show hostnames "$SLURM_JOB_NODELIST")\n'
            'export SLURM_HOSTFILE="$DISTCOMP_JOB_FOLDER/tasks.hosts"\n'
            ': >"$SLURM_HOSTFILE"\n'
            "declare -A MEMBERS=() USED=()\n"
            "for task in $DISTCOMP_TF_TASKS; do\n"
            "    IFS=: read -r role index node <<<\"$task\"\n"
            "    name=${NODES[$node]}\n"
            "    addr=$(scontrol show node \"$name\" | sed -n 's/.*NodeAddr=\\([^ ]*\\).*/\\1/p')\n"
            "    addr=${addr:-$name}\n"
            "    while :; do  # a port nothing listens on at the task's node, not given to another task\n"
            "        port=$((20000 + RANDOM % 30000))\n"
            "        [[ -n ${USED[$addr:$port]:-} ]] && continue\n"
            "        (exec 3<>\"/dev/tcp/$addr/$port\") 2>/dev/null || break\n"
            "    done\n"
            "    USED[$addr:$port]=1\n"
            "    echo \"$name\" >>\"$SLURM_HOSTFILE\"\n"
            "    # TensorFlow keeps the evaluator out of the cluster spec\n"
            "    [[ $role == evaluator ]] || MEMBERS[$role]+=\"${MEMBERS[$role]:+, }\\\"$addr:$port\\\"\"\n"
            "done\n"
            "DISTCOMP_TF_CLUSTER=\"{\"; sep=\"\"\n"
            "for role in chief worker ps; do\n"
            "    [[ -n ${MEMBERS[$role]:-} ]] && DISTCOMP_TF_CLUSTER+=\"$sep\\\"$role\\\": [${MEMBERS[$role]}]\" && sep=\", \"\n"
            "done\n"
            "export DISTCOMP_TF_CLUSTER+=\"}\"\n"
            f"srun --kill-on-bad-exit=1 --ntasks={len(replicas)} --distribution=arbitrary \\\n"
            f"  /bin/sh -c {_q(_TF_TASK)} task \\\n  {command}\n"), max(counts), uneven
