"""The Ray job's driver: the entrypoint the Jobs API runs on the head (``python -m PKG.driver``).

It travels with the job (``runtime_env.py_modules``, beside distcomp's stdlib-only node agent),
so the cluster needs ray and Python, no distcomp: it imports nothing of distcomp. It reads
``job/driver.json`` next to it (what ``compile`` printed, with the job's MLflow run bound),
reserves one bundle per node in a STRICT_SPREAD placement group (a request the cluster can never
hold fails at once, one it cannot hold now after ``wait`` seconds, with the cluster's totals),
starts one ``Node`` actor per bundle, learns each node's address and free ports, then has each
actor start the node agent (``python -m PKG JOB/node.json``) with that node's index and the bound
placeholders in its environment. It prints the ranks' ``[rankN]`` lines (the job's log), ends
every node when one fails or when the job is stopped (SIGTERM from ``stop_job``), and prints one
``DISTCOMP_RAY_OUTCOME {...}`` line that the target reads: the state and the root cause (and,
with ``max_restarts``, the restarts made).

Restarts keep the one rule every target keeps (``longjob.RestartRule``): after a rank's failure
every node's agent is stopped and the whole job starts again, up to ``max_restarts`` K times
(``--max-restarts``, else the spec's), on fresh actors, folders and ports, with ``{{restart}}`` =
1, 2, ... in the node record's values. A lost node is a preemption, no failure: the job starts
again without using one of K, once Ray has placed the lost node's bundle again on a node that
can hold it (the placement wait bounds it). Every rank's ``runtime.checkpoint_dir()`` is the
job's ``--checkpoint-dir``, a folder every node sees, kept across attempts. Ray's own task and
actor retries are not used: a rank is never started again on its own.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from typing import Any

try:  # on the cluster: the node agent's files travel beside this one, in the same package
    from . import longjob, progress  # type: ignore[attr-defined]
except ImportError:  # imported from distcomp itself (its tests): the agent's own
    from ...agent import longjob, progress
try:  # the system-metrics sampler's naming, as the agent's (the same two places)
    from . import sysmetrics  # type: ignore[attr-defined]
except ImportError:
    from ...agent import sysmetrics

OUTCOME = "DISTCOMP_RAY_OUTCOME "
HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE = os.path.basename(HERE)
POLL = 0.3
GUARD = "--guard"


class _Stop(Exception):
    """The job is stopped (SIGTERM, SIGINT)."""


def say(message: str) -> None:
    print(f"distcomp ray: {message}", flush=True)


def fits(bundle: dict[str, float], have: dict[str, float]) -> bool:
    return all(have.get(k, 0.0) >= v for k, v in bundle.items() if v)


def placeable(bundles: list[dict[str, float]], nodes: list[dict[str, float]]) -> bool:
    """Whether each bundle can have a node of its own (bipartite matching, augmenting paths)."""
    owner: dict[int, int] = {}

    def take(b: int, seen: set[int]) -> bool:
        for n, have in enumerate(nodes):
            if n in seen or not fits(bundles[b], have):
                continue
            seen.add(n)
            if n not in owner or take(owner[n], seen):
                owner[n] = b
                return True
        return False

    return all(take(b, set()) for b in range(len(bundles)))


def totals(nodes: list[dict[str, Any]]) -> str:
    """The cluster's nodes and what each has, for messages."""
    def one(node: dict[str, Any]) -> str:
        res = node.get("Resources") or {}
        shown = ", ".join(f"{k} {res[k]:g}" for k in sorted(res)
                          if not k.startswith("node:") and k not in ("object_store_memory",))
        return f"{node.get('NodeManagerAddress', '?')}: {shown or 'nothing'}"
    return f"{len(nodes)} alive node(s): " + "; ".join(one(n) for n in nodes)


def orphan_guard() -> None:
    """In a child, before it runs: SIGTERM when its parent dies (Linux; elsewhere nothing)."""
    if sys.platform == "linux":
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def guard(argv: list[str]) -> int:
    """Run ``argv`` (the node agent) as a child that gets SIGTERM if this process is killed;
    SIGTERM and SIGINT are passed on; its exit code is this one's."""
    import subprocess

    child = subprocess.Popen(argv, preexec_fn=orphan_guard)

    def forward(signum: int, frame: object) -> None:
        child.send_signal(signum)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    code = child.wait()
    return code if code >= 0 else 128 - code


SITE = os.path.join(HERE, "_site")  # distcomp's MLflow hook (a lone sitecustomize.py), as on a local rank


def with_hook(env: dict[str, Any]) -> dict[str, Any]:
    """The record's env with the MLflow hook first on a PYTHONPATH it sets (a TEXT: a string,
    or pieces); where it sets none, the agent's own PYTHONPATH has the hook first. The hook acts
    only in a tracked job's ranks (``DISTCOMP_MLFLOW_RUN_ID``): every top-level
    ``mlflow.start_run()`` resumes the job's run, as on a local rank."""
    given = env.get("PYTHONPATH")
    if given is None:
        return env
    pieces = given if isinstance(given, list) else [given]
    return {**env, "PYTHONPATH": [SITE + os.pathsep, *pieces]}


def free_ports(n: int) -> list[int]:
    """``n`` distinct ports that nothing on this host listens on now."""
    import socket

    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def taken(ports: list[int]) -> list[int]:
    """Those of ``ports`` that cannot be bound on this host now."""
    import socket

    out = []
    for port in ports:
        with socket.socket() as s:
            try:
                s.bind(("", port))
            except OSError:
                out.append(port)
    return out


PORT_TRIES = 5


def agree(ports: list[int], propose: Any, check: Any) -> list[int]:
    """Ports free on every node: node 0's free ``ports``, and ``propose()`` others while
    ``check(ports)`` (the other nodes' taken ones) finds one taken, ``PORT_TRIES`` tries in all;
    a port is named for the whole job, but a replica listens on it on its own node (a TF worker)."""
    for _ in range(PORT_TRIES - 1):
        if not ports or not check(ports):
            break
        ports = propose()
    return ports


def node_class() -> Any:
    import ray

    @ray.remote(max_restarts=0)
    class Node:
        """One node of the job: starts the node agent there and reports its output and end."""

        def __init__(self, index: int) -> None:
            import threading

            self.index = index
            self.folder = ""
            self.popen: Any = None
            self.lines: list[str] = []
            self.lock = threading.Lock()
            self.reader: Any = None

        def where(self, ports: int) -> dict[str, Any]:
            """This node's address and ``ports`` ports that nothing listens on now."""
            import ray

            return {"ip": ray.util.get_node_ip_address(), "node_id": ray.get_runtime_context().get_node_id(),
                    "ports": free_ports(ports)}

        def taken(self, ports: list[int]) -> list[int]:
            """Those of ``ports`` that something on this node holds now."""
            return taken(ports)

        def start(self, record: dict[str, Any], secrets: str, env: dict[str, str], outputs: dict[str, str]) -> None:
            import subprocess
            import tempfile
            import threading

            for path, kind in outputs.items():  # each output's folder, where the node writes it
                os.makedirs(path if kind == "folder" else os.path.dirname(path) or ".", exist_ok=True)
            self.folder = tempfile.mkdtemp(prefix=f"distcomp-ray-node{self.index}-")
            record = {**record, "cwd": os.getcwd(), "env": with_hook(record["env"])}  # cwd: the working_dir here
            # mode 600 whatever the worker's umask: the agent refuses a record others may write
            fd = os.open(os.path.join(self.folder, "node.json"), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(record, f)
            if secrets:
                fd = os.open(os.path.join(self.folder, record["secrets"]), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                with os.fdopen(fd, "w", encoding="utf-8") as f:
                    f.write(secrets)
            bindir = os.path.dirname(sys.executable)  # the ranks' `python` is the cluster's, as the agent's
            full = {**os.environ, **env, "PATH": bindir + os.pathsep + os.environ.get("PATH", ""),
                    "PYTHONPATH": os.pathsep.join(p for p in (SITE, os.environ.get("PYTHONPATH", "")) if p)}

            # [guard, agent]: when Ray ends this worker it SIGKILLs its children (the guard), so the
            # agent is the guard's child, and gets SIGTERM when the guard dies: it stops its ranks
            self.popen = subprocess.Popen([sys.executable, "-m", f"{PACKAGE}.driver", GUARD, sys.executable, "-m",
                                           PACKAGE, os.path.join(self.folder, "node.json")],
                                          cwd=self.folder, env=full, stdin=subprocess.DEVNULL,
                                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, preexec_fn=orphan_guard)

            def read() -> None:
                assert self.popen.stdout is not None
                for raw in self.popen.stdout:
                    with self.lock:
                        self.lines.append(raw.decode("utf-8", "replace").rstrip("\n"))

            self.reader = threading.Thread(target=read, daemon=True)
            self.reader.start()

        def poll(self) -> tuple[list[str], int | None]:
            """The agent's new output lines, and its exit code once it has ended (and all is read)."""
            code = self.popen.poll() if self.popen is not None else None
            if code is not None and self.reader is not None:
                self.reader.join(5)
            with self.lock:
                lines, self.lines = self.lines, []
            return lines, code

        def stop(self, grace: float) -> None:
            """SIGTERM to the agent (it stops its replicas), SIGKILL if it outlives ``grace``."""
            if self.popen is None or self.popen.poll() is not None:
                return
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(grace + 2)
            except Exception:
                self.popen.kill()
                self.popen.wait()

        def exits(self) -> list[dict[str, Any]]:
            """How each replica of this node ended (the agent's ``exits/NAME.json``)."""
            out = []
            folder = os.path.join(self.folder, "exits") if self.folder else ""
            for name in sorted(os.listdir(folder)) if folder and os.path.isdir(folder) else ():
                try:
                    with open(os.path.join(folder, name), encoding="utf-8") as f:
                        out.append(json.load(f))
                except (OSError, ValueError):
                    continue
            return out

        def clean(self) -> None:
            import shutil

            if self.folder:
                shutil.rmtree(self.folder, ignore_errors=True)

    return Node


def root_cause(exits: list[dict[str, Any]], agents: dict[int, tuple[int, list[str]]]) -> str:
    """The first replica that failed by itself: its name, node, exit and last lines; else the
    first agent that failed without a replica's report (a record it could not use)."""
    failed = [e for e in exits if e.get("failed") and not e.get("stopped")]
    if failed:
        first = min(failed, key=lambda e: (float(e.get("ended") or 0), str(e.get("name"))))
        how = (f"was killed by signal {first['signal']}" if first.get("signal")
               else f"exited with code {first.get('exit_code')}")
        if first.get("hang"):  # the node agent found the job stalled (--hang-timeout): where each rank is
            how = "hung\n  " + str(first["hang"]).replace("\n", "\n  ")
        lines = "\n".join(f"    {line}" for line in first.get("tail") or ())
        return f"{first['name']} (node {first.get('node')}, {first.get('host')}) {how}\n{lines}".rstrip("\n")
    for index, (code, tail) in sorted(agents.items()):
        if code:
            shown = "\n".join(f"    {line}" for line in tail[-15:])
            return f"the node agent of node {index} exited with code {code}\n{shown}".rstrip("\n")
    return ""


def finish(state: str, cause: str = "", **more: Any) -> int:
    print(OUTCOME + json.dumps({"state": state, "root_cause": cause, **more}), flush=True)
    return 0 if state == "succeeded" else 1


def attempt_record(record: dict[str, Any], restart: int, max_restarts: int) -> dict[str, Any]:
    """The node record of one attempt: ``{{restart}}`` (0 on the first attempt, then 1, 2, ...)
    and ``{{max_restarts}}`` bound as the local target binds them."""
    return {**record, "values": {**(record.get("values") or {}), "restart": str(restart),
                                 "max_restarts": str(max_restarts)}}


def long_job_env(checkpoint_dir: str, restart: int, max_restarts: int) -> dict[str, str]:
    """What every rank of one attempt is told (``longjob``): its restart count, and the job's
    checkpoint folder where ``--checkpoint-dir`` gave one (else ``runtime.checkpoint_dir()`` is
    ./checkpoint in the rank's own working folder)."""
    env = {longjob.RESTART_ENV: str(restart), longjob.MAX_RESTARTS_ENV: str(max_restarts)}
    if checkpoint_dir:
        env.update(longjob.long_job_env(checkpoint_dir, checkpoint_dir, restart, max_restarts))
    return env


def progress_env(folder: str) -> dict[str, str]:
    """Where every rank of one attempt beats (``progress``): the submitting machine's folder for
    the job, cleared of the last attempt's beats; a folder this node cannot see is made here
    and read by nobody, which costs the job nothing."""
    if not folder:
        return {}
    progress.clear(folder)
    return {progress.PROGRESS_ENV: folder}


def restarting(rule: "longjob.RestartRule", cause: str, lost: bool = False) -> str:
    """What the job's log says as every rank is started again: the count, the cause's first line."""
    first = next((line.strip() for line in cause.splitlines() if line.strip()), "a failure")
    if lost:
        return f"restarting every rank after a lost node (not counted against --max-restarts): {first}"
    return f"restarting every rank (restart {rule.failures} of {rule.max_restarts}): {first}"


def run(config: dict[str, Any], stopping: list[int]) -> int:
    """The job: its nodes reserved, then each attempt (``--max-restarts`` more after a failure,
    every node's agent started again on fresh actors, in fresh folders, with fresh ports); a lost
    node's bundle is placed again by Ray where the cluster can hold it, within the placement wait."""
    import logging

    import ray
    from ray.util.placement_group import placement_group, remove_placement_group

    ray.init(log_to_driver=False, logging_level=logging.WARNING)
    install(stopping)  # over ray.init's own (sys.exit): stopping must reach every node's ranks first
    bundles: list[dict[str, float]] = config["bundles"]
    alive = [n for n in ray.nodes() if n.get("Alive")]
    if not placeable(bundles, [n.get("Resources") or {} for n in alive]):
        return finish("failed", f"the cluster can never hold this job: it needs {len(bundles)} node(s) with "
                                f"{json.dumps(bundles[0])} each (one bundle per node, STRICT_SPREAD); "
                                f"it has {totals(alive)}")
    say(f"reserving {len(bundles)} node(s): {json.dumps(bundles)} (STRICT_SPREAD)")
    pg = placement_group(bundles, strategy="STRICT_SPREAD", name=config["job"])
    actors: list[Any] = []
    tails: dict[int, list[str]] = {}
    rule = longjob.RestartRule(int(config.get("max_restarts") or 0))
    counted = {"restarts": 0, "causes": rule.causes}
    try:
        ready = pg.ready()
        if not reserve(lambda: bool(ray.wait([ready], timeout=1.0)[0]), config, stopping):
            return finish("failed", f"the cluster did not have {len(bundles)} free node(s) with "
                                    f"{json.dumps(bundles[0])} within {config['wait']:g} s (--placement-timeout); "
                                    f"it has {totals([n for n in ray.nodes() if n.get('Alive')])}; "
                                    f"free now: {json.dumps(ray.available_resources(), sort_keys=True)}")
        node = node_class()
        while True:
            record = attempt_record(config["record"], rule.attempt, rule.max_restarts)
            env = {**long_job_env(str(config.get("checkpoint_dir") or ""), rule.attempt, rule.max_restarts),
                   **progress_env(str(config.get("progress_dir") or ""))}
            state, cause, nodes, lost = attempt(node, pg, config, record, actors, tails, stopping, env)
            if stopping:
                raise _Stop
            if state == "succeeded" or not rule.again(cause, failure=lost is None):
                return finish(state, cause, nodes=nodes, **counted)
            counted["restarts"] = rule.attempt
            say(restarting(rule, cause, lost=lost is not None))
            drop(actors)
            tails.clear()
            if lost is not None and not reserve(lambda: rescheduled(pg, lost), config, stopping):
                return finish("failed", f"{cause}\n    (no node took its place within {config['wait']:g} s "
                                        f"(--placement-timeout); the cluster has "
                                        f"{totals([n for n in ray.nodes() if n.get('Alive')])})", **counted)
    except _Stop:
        say("stopping: every node's ranks")
        stop_all(actors, config, tails)
        return finish("cancelled", "stopped (distcomp cancel, or ray job stop)", **counted)
    finally:
        drop(actors)
        remove_placement_group(pg)


def reserve(ready: Any, config: dict[str, Any], stopping: list[int]) -> bool:
    """Whether ``ready()`` (each call waits a moment) said yes within the placement wait."""
    deadline = time.monotonic() + float(config["wait"])
    while not ready():
        if stopping:
            raise _Stop
        if time.monotonic() >= deadline:
            return False
    return True


def rescheduled(pg: Any, lost: str) -> bool:
    """Whether every bundle is placed again after Ray node ``lost`` was: the GCS has marked it
    dead (an actor's call fails before it does, while the group still reads CREATED), and Ray
    has rescheduled its bundle on a node that can hold it (the group is CREATED again)."""
    import ray
    from ray.util.placement_group import placement_group_table

    if (not any(n.get("NodeID") == lost and n.get("Alive") for n in ray.nodes())
            and placement_group_table(pg).get("state") == "CREATED"):
        return True
    time.sleep(POLL)
    return False


def attempt(node: Any, pg: Any, config: dict[str, Any], record: dict[str, Any], actors: list[Any],
            tails: dict[int, list[str]], stopping: list[int],
            long_job: dict[str, str] | None = None) -> tuple[str, str, list[str], str | None]:
    """One attempt on fresh actors (put in ``actors``): its state, root cause, the nodes'
    addresses, and the Ray node id of a node that was lost ("" when it is not known), else None."""
    import ray
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    for i, b in enumerate(config["bundles"]):
        extra = {k: v for k, v in b.items() if k not in ("CPU", "GPU", "memory")}
        actors.append(node.options(num_cpus=b.get("CPU", 0), num_gpus=b.get("GPU", 0), memory=b.get("memory"),
                                   resources=extra or None, scheduling_strategy=PlacementGroupSchedulingStrategy(
                                       pg, placement_group_bundle_index=i)).remote(i))
    ports = len(record["ports"])
    try:
        places = ray.get([a.where.remote(ports if i == 0 else 0) for i, a in enumerate(actors)],
                         timeout=float(config["wait"]))
        if ports and len(actors) > 1:
            places[0]["ports"] = agree(places[0]["ports"], lambda: ray.get(actors[0].where.remote(ports))["ports"],
                                       lambda wanted: {p for a in actors[1:] for p in ray.get(a.taken.remote(wanted))})
    except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        return "failed", f"a node was lost as the job started: {first}", [], ""
    nodes = [p["ip"] for p in places]
    env = {"DISTCOMP_RAY_JOB": config["job"], **(long_job or {})}
    for i, place in enumerate(places):
        env[f"DISTCOMP_HOST_{i}"] = env[f"DISTCOMP_NODE_{i}"] = place["ip"]
    for i, port in enumerate(places[0]["ports"]):
        env[f"DISTCOMP_PORT_{i}"] = str(port)
    for i, place in enumerate(places):
        say(f"node {i}: {place['ip']} (Ray node {place['node_id'][:12]})")
    if stopping:
        raise _Stop
    ray.get([a.start.remote(record, config.get("secrets") or "",
                            {**env, "DISTCOMP_RAY_NODE_INDEX": str(i), "DISTCOMP_RAY_NODE_NAME": places[i]["ip"],
                             **sysmetrics.node_env(nodes, i)},
                            config.get("outputs") or {})
             for i, a in enumerate(actors)])
    ended: dict[int, int] = {}
    while len(ended) < len(actors):
        if stopping:
            raise _Stop
        refs = [a.poll.remote() for a in actors]
        for i, ref in enumerate(refs):
            try:
                lines, code = ray.get(ref)
            except ray.exceptions.RayActorError as exc:  # its node died (a raylet killed, a machine lost)
                stop_all(actors, config, tails)
                first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
                return "failed", (f"node {i} ({places[i]['ip']}, Ray node {places[i]['node_id'][:12]}) "
                                  f"was lost mid-job: {first}"), nodes, places[i]["node_id"]
            for line in lines:
                print(line, flush=True)
            tails.setdefault(i, []).extend(lines)
            del tails[i][:-30]
            if code is not None:
                ended.setdefault(i, code)
        if any(code != 0 for code in ended.values()):
            break
        time.sleep(POLL)
    stop_all(actors, config, tails)
    exits = [e for found in gather([a.exits.remote() for a in actors], []) for e in found]
    agents = {i: (code, tails.get(i, [])) for i, code in ended.items()}
    if all(ended.get(i) == 0 for i in range(len(actors))):
        return "succeeded", "", nodes, None
    return "failed", root_cause(exits, agents) or "a node agent failed", nodes, None


def drop(actors: list[Any]) -> None:
    """Each actor's node folder removed and the actor ended (its bundle free for the next)."""
    import ray

    for a in actors:
        try:
            ray.get(a.clean.remote(), timeout=10)
        except Exception:
            pass
        try:
            ray.kill(a, no_restart=True)
        except Exception:
            pass
    actors.clear()


def gather(refs: list[Any], lost: Any) -> list[Any]:
    """Each result, or ``lost`` for an actor that died with its node."""
    import ray

    out = []
    for ref in refs:
        try:
            out.append(ray.get(ref, timeout=60))
        except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError):
            out.append(lost)
    return out


def stop_all(actors: list[Any], config: dict[str, Any], tails: dict[int, list[str]]) -> None:
    """Every node's agent stopped, and the last of its output printed (a lost node's: nothing)."""
    gather([a.stop.remote(float(config["record"].get("grace", 5.0))) for a in actors], None)
    for i, (lines, _code) in enumerate(gather([a.poll.remote() for a in actors], ([], None))):
        for line in lines:
            print(line, flush=True)
        tails.setdefault(i, []).extend(lines)


def install(stopping: list[int]) -> None:
    """SIGTERM (``stop_job``) and SIGINT say: stop the job (the main loop does it)."""
    def on_signal(signum: int, frame: object) -> None:
        stopping.append(signum)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)


def main() -> int:
    if sys.argv[1:2] == [GUARD]:
        return guard(sys.argv[2:])
    stopping: list[int] = []
    install(stopping)
    with open(os.path.join(HERE, "job", "driver.json"), encoding="utf-8") as f:
        config = json.load(f)
    secrets = os.path.join(HERE, "job", "secrets.sh")
    if os.path.exists(secrets):
        with open(secrets, encoding="utf-8") as f:
            config["secrets"] = f.read()
    return run(config, stopping)


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # not ray.shutdown at exit (0.5-0.8 s, a tenth of a small job): every node's agent is stopped
    # and the placement group removed already, and Ray ends a gone driver's actors itself
    os._exit(code)
