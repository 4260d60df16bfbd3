"""A Kubeflow operator and a kubelet, emulated on this machine, for pod-level conformance tests.

Given a manifest ``distcomp compile --target kubeflow`` wrote, the functions here make the
pods the operator would create (their container command and env, exactly as the operator
and the kubelet build them), then run every pod's container command as a process of its
own, concurrently, as the pods would run.

What is emulated, and from where:

- the kubelet: a container's env is its ``env`` list in order, each value expanded against
  the variables before it; ``command`` is then expanded against the whole env
  (``$(NAME)``; ``$$`` is a literal ``$``; an unknown name is left as written), as in
  kubernetes/third_party/forked/golang/expansion/expand.go;
- training-operator v1.9 (pkg/controller.v1/pytorch/envvar.go, master.go): the env every
  PyTorchJob pod gets;
- training-operator v1.9 (pkg/controller.v1/tensorflow/tensorflow.go, tfjob_controller.go,
  util.go): the TF_CONFIG every TFJob pod gets;
- mpi-operator v0.8 (pkg/controller/mpi_job_controller.go): the launcher's env and the
  hostfile it mounts at /etc/mpi/hostfile;
- restarts (:func:`run_pods` given the replicas' ``restartPolicy`` and ``runPolicy.backoffLimit``):
  the kubelet restarts a container of an ``OnFailure`` pod in place, the same pod and env, its
  restart count one higher; training-operator v1.9 deletes an ``ExitCode`` pod that failed with a
  retryable code (>= 128, pkg/util/train IsRetryableExitCode) and creates it again under the same
  name, and fails the job on any other code; it fails the job once the restart counts of its
  running pods add up to ``backoffLimit`` (more than 0 for a limit of 0: pkg/core/job.go
  PastBackoffLimit), or at the first failure of an ``ExitCode`` pod when the limit is 0
  (ReconcileJobs' exceedsBackoffLimit, its work queue never requeueing). No back-off delay here.

Then the cluster network is stood in for: a service name a pod connects to is replaced
by 127.0.0.1 in the operator's variable that carries it (``Pod.with_env``) and, as all pods
share this machine's one network namespace, each port a pod listens on by a distinct free
one (:func:`free_ports`, :func:`localize_endpoints`). An MPIJob's workers run sshd, which
cannot run here: :func:`mpi_on_this_machine` replaces ssh by distcomp's node agent in a
fresh env, as a real ssh session would have.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import psutil

from distcomp.launchers.mpi import prterun_shim
from distcomp.core.mpiline import SHARE_HOST
from distcomp.targets.local._ports import free_ports

LOCALHOST = "127.0.0.1"
NODE_AGENT = Path(__file__).resolve().parents[3] / "plugin" / "distcomp" / "launchers" / "node_agent.sh"
BINDIR = str(Path(sys.executable).parent)  # torchrun, mpirun, python: the image's, here the venv's


# --- the kubelet -------------------------------------------------------------------------


def expand(text: str, env: Mapping[str, str]) -> str:
    """``text`` with ``$(NAME)`` replaced by ``env[NAME]``, as the kubelet expands a
    container's command, args and env values: ``$$`` is an escaped ``$``; a reference to a
    name not in ``env`` stays as written; a ``$`` not starting either is kept as is."""
    out: list[str] = []
    checkpoint = cursor = 0
    while cursor < len(text):
        if text[cursor] == "$" and cursor + 1 < len(text):
            out.append(text[checkpoint:cursor])
            rest = text[cursor + 1:]
            if rest[0] == "$":  # escaped operator
                read, advance = "$", 1
            elif rest[0] == "(":
                close = rest.find(")", 1)
                if close == -1:  # incomplete reference: kept as written
                    read, advance = "$(", 1
                else:
                    name = rest[1:close]
                    read, advance = (env[name] if name in env else f"$({name})"), close + 1
            else:
                read, advance = "$" + rest[0], 1
            out.append(read)
            cursor += advance
            checkpoint = cursor + 1
        cursor += 1
    return "".join(out) + text[checkpoint:]


def container_env(items: Iterable[tuple[str, str]], base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The env a container's process sees: ``base`` (the image's ENV), then each item in
    order, its value expanded against the items before it (not the image's env), as the
    kubelet does; a repeated name takes its last value."""
    declared: dict[str, str] = {}
    for name, value in items:
        declared[name] = expand(value, declared) if value else value
    return {**(base or {}), **declared}


def image_env(hostname: str) -> dict[str, str]:
    """What the image and the runtime put in every container here: the image's PATH (this
    virtualenv first, standing for the image's Python), HOME, and the pod's HOSTNAME."""
    env = {"PATH": os.pathsep.join([BINDIR, "/usr/local/bin", "/usr/bin", "/bin"]),
           "HOME": os.environ.get("HOME", "/root"), "HOSTNAME": hostname}
    for name in ("LANG", "LC_ALL", "TMPDIR"):
        if name in os.environ:
            env[name] = os.environ[name]
    return env


@dataclass(frozen=True)
class Pod:
    """One pod the operator creates: its main container's command and its env (the
    manifest's items plus the operator's, in the order the kubelet reads them)."""

    name: str
    replica_type: str  # as in the manifest: Master, Worker, Launcher, Chief, PS, ...
    index: int
    command: tuple[str, ...]
    env_items: tuple[tuple[str, str], ...]
    workdir: str | None = None
    extra_env: Mapping[str, str] = field(default_factory=dict)  # the emulation's, not the manifest's

    @property
    def env(self) -> dict[str, str]:
        """The env the container's process sees."""
        return {**container_env(self.env_items, image_env(self.name)), **self.extra_env}

    @property
    def argv(self) -> list[str]:
        """The command the container runtime executes: each word expanded by the kubelet."""
        env = container_env(self.env_items)  # the kubelet expands against the declared env only
        return [expand(word, env) for word in self.command]

    def with_env(self, **values: str) -> "Pod":
        """This pod with the operator's variables ``values`` replaced (each must exist)."""
        names = {name for name, _ in self.env_items}
        missing = sorted(set(values) - names)
        assert not missing, f"{self.name}: the operator set no {missing}"
        return replace(self, env_items=tuple((n, values.get(n, v)) for n, v in self.env_items))


def _replicas(manifest: Mapping[str, Any], key: str) -> dict[str, Mapping[str, Any]]:
    specs = manifest["spec"][key]
    assert isinstance(specs, dict) and specs, f"{manifest['kind']}: no {key}"
    return specs


def _container(kind: str, replica_type: str, spec: Mapping[str, Any], name: str | None) -> Mapping[str, Any]:
    containers = spec["template"]["spec"]["containers"]
    if name is None:  # mpi-operator takes the first container
        return containers[0]
    found = [c for c in containers if c.get("name") == name]
    assert found, f"{kind} {replica_type}: no container named {name!r}, which the operator looks for"
    return found[0]


def _items(container: Mapping[str, Any]) -> list[tuple[str, str]]:
    items = []
    for var in container.get("env", ()):
        assert "valueFrom" not in var, f"env {var['name']}: valueFrom is not emulated"
        items.append((var["name"], str(var.get("value", ""))))
    return items


def _port(container: Mapping[str, Any], name: str) -> int | None:
    for p in container.get("ports", ()):
        if p.get("name") == name:
            return int(p["containerPort"])
    return None


def _namespace(manifest: Mapping[str, Any]) -> str:
    return manifest["metadata"].get("namespace") or "default"  # kubectl apply's default


# --- training-operator v1.9: PyTorchJob --------------------------------------------------


def pytorchjob_pods(manifest: Mapping[str, Any]) -> list[Pod]:
    """Master 0, then Workers 0..N-1, each with the env setPodEnv gives it."""
    assert manifest["kind"] == "PyTorchJob"
    job = manifest["metadata"]["name"]
    specs = _replicas(manifest, "pytorchReplicaSpecs")
    assert "Master" in specs, "PyTorchJob without a Master: the operator sets no MASTER_ADDR/RANK"
    nproc = manifest["spec"].get("nprocPerNode", "auto")  # the v1.9 default
    per_node = int(nproc) if str(nproc).isdigit() else 1  # getNprocPerNodeInt: 1 unless an int
    pods_total = sum(int(s.get("replicas", 1)) for s in specs.values())  # getTotalReplicas
    master_port = _port(_container("PyTorchJob", "Master", specs["Master"], "pytorch"), "pytorchjob-port")
    assert master_port is not None, "the Master's 'pytorch' container has no port 'pytorchjob-port': " \
                                    "the operator fails the job (port not found)"
    pods = []
    for rtype in ("Master", "Worker"):
        if rtype not in specs:
            continue
        container = _container("PyTorchJob", rtype, specs[rtype], "pytorch")
        for index in range(int(specs[rtype].get("replicas", 1))):
            rank = index + 1 if rtype == "Worker" else index
            operator = [("PYTHONUNBUFFERED", "0"),
                        ("MASTER_PORT", str(master_port)), ("MASTER_ADDR", f"{job}-master-0"),
                        ("WORLD_SIZE", str(pods_total * per_node)), ("RANK", str(rank)),
                        ("PET_NPROC_PER_NODE", str(nproc)), ("PET_NODE_RANK", str(rank)),
                        ("PET_NNODES", str(pods_total))]  # no elasticPolicy: PET_NNODES is the pod count
            pods.append(Pod(f"{job}-{rtype.lower()}-{index}", rtype, index, tuple(container["command"]),
                            (*_items(container), *operator), container.get("workingDir")))
    return pods


# --- training-operator v1.9: TFJob -------------------------------------------------------

TF_TYPES = ("Chief", "Master", "PS", "Worker", "Evaluator")


def tfjob_pods(manifest: Mapping[str, Any]) -> list[Pod]:
    """One pod per task, each with the TF_CONFIG genTFConfigJSONStr gives it."""
    assert manifest["kind"] == "TFJob"
    job, namespace = manifest["metadata"]["name"], _namespace(manifest)
    specs = _replicas(manifest, "tfReplicaSpecs")
    unknown = sorted(set(specs) - set(TF_TYPES))
    assert not unknown, f"TFJob replica types {unknown} are not the operator's {TF_TYPES}"
    cluster: dict[str, list[str]] = {}
    for rtype, spec in specs.items():  # genClusterSpec: every type, DNS names of the headless services
        port = _port(_container("TFJob", rtype, spec, "tensorflow"), "tfjob-port") or 2222
        rt = rtype.lower()
        cluster[rt] = [f"{job}-{rt}-{i}.{namespace}.svc:{port}" for i in range(int(spec.get("replicas", 1)))]
    distributed = sum(int(s.get("replicas", 1)) for s in specs.values()) != 1  # isDistributed
    pods = []
    for rtype in TF_TYPES:
        if rtype not in specs:
            continue
        container = _container("TFJob", rtype, specs[rtype], "tensorflow")
        for index in range(int(specs[rtype].get("replicas", 1))):
            items = _items(container)
            if distributed:
                # Go's json.Marshal: struct fields in order, map keys sorted, no spaces
                config = {"cluster": dict(sorted(cluster.items())), "task": {"type": rtype.lower(), "index": index},
                          "environment": "cloud"}
                items.append(("TF_CONFIG", json.dumps(config, separators=(",", ":"))))
            pods.append(Pod(f"{job}-{rtype.lower()}-{index}", rtype, index, tuple(container["command"]), tuple(items),
                            container.get("workingDir")))
    return pods


# --- mpi-operator v0.8: MPIJob v2beta1 ---------------------------------------------------

MPI_HOSTFILE = "/etc/mpi/hostfile"


def mpijob_pods(manifest: Mapping[str, Any]) -> tuple[Pod, list[Pod], str]:
    """The Launcher pod, the Worker pods, and the hostfile (the ConfigMap the launcher
    mounts at /etc/mpi/hostfile), as the controller makes them for Open MPI."""
    assert manifest["kind"] == "MPIJob" and manifest["apiVersion"] == "kubeflow.org/v2beta1"
    spec = manifest["spec"]
    job, namespace = manifest["metadata"]["name"], _namespace(manifest)
    assert spec.get("mpiImplementation", "OpenMPI") == "OpenMPI", "only Open MPI is emulated"
    specs = _replicas(manifest, "mpiReplicaSpecs")
    slots = int(spec.get("slotsPerWorker", 1))
    workers = int(specs["Worker"].get("replicas", 0)) if "Worker" in specs else 0
    hostfile = "".join(f"{job}-worker-{i}.{job}.{namespace}.svc slots={slots}\n" for i in range(workers))
    launcher_c = _container("MPIJob", "Launcher", specs["Launcher"], None)
    launcher_env = [("K_MPI_JOB_ROLE", "launcher"),
                    ("OMPI_MCA_orte_keep_fqdn_hostnames", "true"),
                    ("OMPI_MCA_orte_default_hostfile", MPI_HOSTFILE),
                    ("OMPI_MCA_plm_rsh_args", "-o ConnectionAttempts=10"),
                    ("OMPI_MCA_orte_set_default_slots", str(slots)),
                    ("NVIDIA_VISIBLE_DEVICES", ""), ("NVIDIA_DRIVER_CAPABILITIES", "")]  # runLauncherAsWorker unset
    launcher = Pod(f"{job}-launcher", "Launcher", 0, tuple(launcher_c["command"]),
                   (*_items(launcher_c), *launcher_env), launcher_c.get("workingDir"))
    worker_c = _container("MPIJob", "Worker", specs["Worker"], None) if workers else None
    pods = []
    for i in range(workers):
        assert worker_c is not None
        command = tuple(worker_c.get("command") or ("/usr/sbin/sshd", "-De"))
        pods.append(Pod(f"{job}-worker-{i}", "Worker", i, command,
                        (*_items(worker_c), ("K_MPI_JOB_ROLE", "worker")), worker_c.get("workingDir")))
    return launcher, pods, hostfile


# --- the cluster network, on this machine ------------------------------------------------


def localize_endpoints(endpoints: Sequence[str]) -> dict[str, str]:
    """``host:port`` of each pod service -> ``127.0.0.1:FREE``, a distinct port each (the
    pods share this machine's one network namespace)."""
    unique = list(dict.fromkeys(endpoints))
    return {e: f"{LOCALHOST}:{p}" for e, p in zip(unique, free_ports(len(unique)))}


SSH_SESSION = """#!/bin/sh
# Stands in for `ssh HOST COMMAND` into a worker pod whose sshd (the Worker's container
# command) cannot run here: sshd gives the session a fresh env, never the launcher's, so
# the ranks see only what mpirun forwards (-x NAME, its own OMPI_/PRTE_ settings). Then
# distcomp's node agent starts the worker's daemon on this machine, as the local target
# does for simulated nodes. DISTCOMP_TEST_NODE (the host mpirun named: a worker's service)
# tells a rank which worker pod it stands in, as its host name would in the cluster.
exec env -i HOME={home} PATH={path} DISTCOMP_TEST_NODE="$1" /bin/sh {agent} "$@"
"""


def mpi_on_this_machine(launcher: Pod, workers: Sequence[Pod], hostfile: str, folder: Path) -> Pod:
    """The Launcher pod as it runs here. The operator's hostfile is written, unchanged, to
    ``folder`` (the ConfigMap mounted at /etc/mpi/hostfile); mpirun starts each worker's
    daemon through the ssh stand-in above, which ignores the host name as distcomp's node
    agent does, so worker N's service name stands for a simulated node on this machine."""
    lines = hostfile.splitlines()
    assert [line.split(".")[0] for line in lines] == [w.name for w in workers], \
        f"the hostfile does not list the {len(workers)} workers in order: {hostfile!r}"
    path = folder / "hostfile"
    path.write_text(hostfile, encoding="utf-8")
    session = folder / "ssh_session.sh"
    session.write_text(SSH_SESSION.format(home=os.environ.get("HOME", "/root"),
                                          path=os.pathsep.join([BINDIR, "/usr/bin", "/bin"]), agent=NODE_AGENT),
                       encoding="utf-8")
    # the only change to the launcher: /etc/mpi/hostfile (the mounted ConfigMap) is the file above,
    # in distcomp's mpirun argv or, for the user's own mpirun, in $AZUREML_MPI_HOSTFILE
    command = list(launcher.command)
    at = [i for i, w in enumerate(command[:-1]) if w == "--hostfile" and command[i + 1] == MPI_HOSTFILE]
    if launcher.env.get("AZUREML_MPI_HOSTFILE") == MPI_HOSTFILE and not at:
        # the user's own mpirun: every variable naming the mounted hostfile names this one
        launcher = launcher.with_env(**{n: str(path) for n, v in launcher.env_items if v == MPI_HOSTFILE})
    else:
        assert len(at) == 1, f"the launcher's mpirun does not read {MPI_HOSTFILE} once: {command}"
        command[at[0] + 1] = str(path)
    local = replace(launcher, command=tuple(command)).with_env(OMPI_MCA_orte_default_hostfile=str(path))
    # what distcomp's local target sets for simulated nodes (plugin/distcomp/launchers/mpi.py)
    extra = {"PRTE_MCA_plm_ssh_agent": f"/bin/sh {session}", "OMPI_MCA_btl": "self,tcp", "OMPI_MCA_coll": "^han"}
    # The images a seed's MPIJob names run Open MPI 4, which reads the user's single-dash options
    # (-bind-to none); the Open MPI 5 here reads them through distcomp's shim, as a local run does,
    # and the shim keeps a btl the user names off shared memory across these simulated nodes.
    shim = prterun_shim()
    if shim is not None:
        extra.update({"OMPI_PRTERUN": shim, SHARE_HOST: "1"})
    return replace(local, extra_env=extra)


# --- running the pods --------------------------------------------------------------------


@dataclass
class Started:
    pod: Pod
    proc: subprocess.Popen[bytes]
    log: Path
    started: float

    @property
    def output(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")


@dataclass
class Finished:
    pods: list[Started]
    codes: dict[str, int | None]  # pod name -> exit code (None: killed still running)
    elapsed: float
    restarts: dict[str, int] = field(default_factory=dict)  # pod name -> times started again
    failed: str = ""  # why the operator failed the job (its backoff limit), if it did

    def explain(self) -> str:
        parts = [f"exit codes {self.codes} after {self.elapsed:.1f} s; restarts {self.restarts} {self.failed}"]
        for s in self.pods:
            parts += [f"--- {s.pod.name}: {' '.join(s.pod.argv)}", s.output[-3000:]]
        return "\n".join(parts)


RETRYABLE = 128  # training-operator's IsRetryableExitCode: exit codes from here on (signals) are retried


def _restarted(code: int, policy: str) -> bool:
    """Whether a container that exited with ``code`` runs again under ``policy`` (kubelet or operator)."""
    return code != 0 and (policy == "OnFailure" or (policy == "ExitCode" and code >= RETRYABLE))


def _past_backoff(counts: Mapping[str, int], policies: Mapping[str, str], limit: int | None) -> bool:
    """PastBackoffLimit: the in-place restarts of the pods whose policy counts, against the limit."""
    if limit is None:
        return False
    total = sum(n for pod, n in counts.items() if policies[pod] in ("OnFailure", "Always", "ExitCode"))
    return total > 0 if limit == 0 else total >= limit




def _session_members(sid: int) -> list[int]:
    found = []
    for p in psutil.process_iter(["pid"]):
        try:
            if os.getsid(p.info["pid"]) == sid:
                found.append(p.info["pid"])
        except (ProcessLookupError, PermissionError):
            pass
    return found


def _kill_session(leader: int) -> None:
    """SIGKILL every process of the session ``leader`` started (each pod runs in its own)."""
    for pid in _session_members(leader):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _start(pod: Pod, cwd: Path, log: Path) -> Started:
    with log.open("ab") as out:  # a restarted container's output follows its last one's, as `kubectl logs` keeps
        proc = subprocess.Popen(pod.argv, cwd=pod.workdir or cwd, env=pod.env, stdin=subprocess.DEVNULL,
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    return Started(pod, proc, log, time.monotonic())


def run_pods(pods: Sequence[Pod], cwd: Path, logs: Path, timeout: float,
             restart_policy: Mapping[str, str] | None = None, backoff_limit: int | None = None) -> Finished:
    """Start every pod's container command at once, each in a session (and process
    group) of its own, output to ``logs/POD.log``; wait for all. The first pod to fail (and
    not restart), the backoff limit, or the timeout, ends the rest; whatever they started is
    killed by session, so no process outlives this call. ``restart_policy``: replica type ->
    its ``restartPolicy`` (default Never: a failure ends the job); ``backoff_limit``: the
    job's ``runPolicy.backoffLimit``."""
    logs.mkdir(parents=True, exist_ok=True)
    started: list[Started] = []
    policies = {p.name: (restart_policy or {}).get(p.replica_type, "Never") for p in pods}
    in_place = {p.name: 0 for p in pods}  # the kubelet's restartCount of each pod (OnFailure)
    again = {p.name: 0 for p in pods}  # every start after the first, in place or a new pod
    failed = ""
    ended: list[Started] = []  # restarted containers' old processes, reaped at the end
    t0 = time.monotonic()
    try:
        for pod in pods:
            (logs / f"{pod.name}.log").unlink(missing_ok=True)
            started.append(_start(pod, cwd, logs / f"{pod.name}.log"))
        codes: dict[str, int | None] = {}
        while len(codes) < len(started):
            for i, s in enumerate(started):
                if s.pod.name in codes or s.proc.poll() is None:
                    continue
                code, policy = s.proc.returncode, policies[s.pod.name]
                if not _restarted(code, policy):
                    codes[s.pod.name] = code
                    continue
                if policy == "ExitCode" and backoff_limit == 0:  # exceedsBackoffLimit
                    codes[s.pod.name] = code
                    failed = "backoff limit 0: the job failed at its first pod failure"
                    continue
                _kill_session(s.proc.pid)  # the old container's processes go with it
                ended.append(s)
                started[i] = _start(s.pod, cwd, s.log)
                again[s.pod.name] += 1
                if policy == "OnFailure":
                    in_place[s.pod.name] += 1
                    running = {n: c for n, c in in_place.items() if n not in codes}  # Running pods only
                    if _past_backoff(running, policies, backoff_limit):
                        failed = f"backoff limit {backoff_limit} reached: restarts {in_place}"
            if failed or any(c != 0 for c in codes.values()) or time.monotonic() - t0 > timeout:
                break
            time.sleep(0.05)
        for s in started:
            codes.setdefault(s.pod.name, None)
        return Finished(started, codes, time.monotonic() - t0, again, failed)
    finally:
        for s in started:
            try:  # its descendants first, while they can still be found from it (a daemon may setsid)
                family = psutil.Process(s.proc.pid).children(recursive=True)
            except psutil.NoSuchProcess:
                family = []
            if s.proc.poll() is None:
                try:
                    os.killpg(s.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            for child in family:
                try:
                    child.kill()
                except psutil.NoSuchProcess:
                    pass
            _kill_session(s.proc.pid)  # and whatever else the pod's session holds (orphans included)
            s.proc.wait()
        for s in ended:
            s.proc.wait()


def rank_records(folder: Path) -> dict[int, dict[str, Any]]:
    """rankN.json -> {N: record} for every rank that wrote one."""
    out = {}
    for path in sorted(folder.glob("rank*.json")):
        match = re.fullmatch(r"rank(\d+)\.json", path.name)
        if match:
            out[int(match.group(1))] = json.loads(path.read_text(encoding="utf-8"))
    return out
