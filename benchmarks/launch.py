"""Whole-job wall time of `distcomp run` against the raw launchers, side by side.

Each round runs every variant once, as a fresh process (what a user pays: interpreter start,
imports, launch, the job, teardown), alternating which variant of a pair goes first; medians
over the rounds are printed with their ratio to the raw tool. The jobs are in benchmarks/jobs/:

  torch all-reduce   distcomp run torch_allreduce   vs  torchrun --standalone --nproc-per-node 2
  mpi all-reduce     distcomp run mpi_allreduce     vs  mpirun --allow-run-as-root -np 2
  tf all-reduce      distcomp run tf_allreduce      vs  two workers spawned by hand with TF_CONFIG
  failure-to-end     distcomp run torch_fail        vs  torchrun on the same script: seconds from
                     rank 1's os._exit(1) (it writes time.time() to $BENCH_FAIL_STAMP first) to
                     the launcher's own exit, while rank 0 sleeps 60 s and must be stopped
  mpi failure-to-end distcomp run mpi_fail       vs  mpirun on the same script: the same seconds,
                     rank 1's sys.exit(1) (mpi4py's MPI_Finalize then waits for rank 0) while
                     rank 0 sleeps 10 s: mpirun alone ends the job only when rank 0 does
  torch 2x2          distcomp run torch_allreduce --nodes 2 --nproc-per-node 2
                                                    vs  TorchX, a peer: torchx run -s local_cwd dist.ddp -j 2x2
                     (needs torchx: pip install --no-deps torchx==0.7.0 pyre-extensions typing-inspect;
                     its own requirements would downgrade urllib3 under MLflow and kubernetes)
  own start          distcomp run start: from starting `distcomp run` to its one rank running
                     (`date +%s%N` prints the moment)  vs  starting `date` directly
  cgroup             the same start with the job's cgroup (where the kernel allows one)
                                                    vs  without (DISTCOMP_CGROUP=off)
  yamlcache          the same start, the spec's parse kept between runs (base/yamlcache.py)
                                                    vs  parsed by PyYAML each run (DISTCOMP_YAML_CACHE=off)
  function start     distcomp run start_fn.py:start, a @distcomp.component function on 2 ranks
                     that prints `time.time_ns()`: from starting `distcomp run` to the later
                     rank's line  vs  the same job written as YAML (component.yaml + script.py,
                     in the same folder, benchmarks/jobs/fn_start/): goal +50 ms (issue 25)
  function job       the same two, the whole job's wall time: goal +50 ms
  function torch     torch all-reduce, 2 ranks, as a function that imports torch inside
                     (benchmarks/jobs/torch_allreduce/allreduce_fn.py)  vs  the YAML job
                     of that folder (component.yaml + script.py): goal +50 ms
  function torch top the same function with torch imported at the module's top: the launcher
                     imports the module to read the signature, so it imports torch too: goal +50 ms

Beside each row: the CPU seconds (user + system) of each side, its processes all together; on a
busy machine they vary less than wall time.

The raw tools get PATH with the venv's bin first, as distcomp gives its ranks, so `python`,
`torchrun` and `mpirun` are the same programs on both sides. Each command starts in its own
process group but in this script's session, as from one terminal: with the kernel's autogroup
scheduling a session is one CPU share, so starting each side in a new session would hand the
two hand-spawned TF workers two shares against distcomp's one. (torchrun itself starts every
worker in a session of its own, which helps it when other sessions load the machine.)

Every process a run starts is tagged in its environment; after each run the tag is looked for
in /proc, and a process left behind is reported (and killed). Exit 0 whatever the numbers
(2 if a run broke); with --check, 1 when a goal is missed. Other work on the machine skews
the numbers: the load average is printed with them.

    python benchmarks/launch.py [--rounds N] [--tf-rounds N] [--skip-tf] [--only torch,mpi,tf,fail,mpifail,torchx,start,cgroup,fnstart,fnwall,fntorch,fntop]
                                [--warmup N] [--timeout S] [--pycache] [--check]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from _report import Judge, Row, added_at_most, finish, load, ratio_at_most, seconds_at_most  # benchmarks/_report.py

ROOT = Path(__file__).resolve().parents[1]
JOBS = ROOT / "benchmarks" / "jobs"
BIN = Path(sys.executable).parent
TAG = "DISTCOMP_LAUNCH_BENCH_TAG"
OK_LINE = b"all-reduce ok"
ENV_OVERRIDES: dict[str, str | None] = {}  # for every process of every variant; None unsets


class RunError(Exception):
    """One run did not do what it should (wrong exit code, missing output, timed out)."""


def base_env() -> dict[str, str]:
    """This environment with the venv's bin first on PATH (what distcomp gives its ranks)."""
    env = dict(os.environ)
    path = env.get("PATH", os.defpath).split(os.pathsep)
    if path[:1] != [str(BIN)]:
        env["PATH"] = os.pathsep.join([str(BIN), *path])
    for name, value in ENV_OVERRIDES.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return env


def free_ports(count: int) -> list[int]:
    socks = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def tagged(tag: str) -> list[int]:
    """Pids of live processes whose environment carries this run's tag."""
    needle = f"{TAG}={tag}".encode()
    pids = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry.name}/environ", "rb") as f:
                if needle in f.read().split(b"\0"):
                    pids.append(int(entry.name))
        except OSError:
            continue
    return pids


def tail(path: Path, lines: int = 25) -> str:
    try:
        text = path.read_text("utf-8", "replace").splitlines()
    except OSError:
        return f"(no log at {path})"
    if not text:
        return "    (empty)"
    return "\n".join(f"    {line}" for line in text[-lines:])


@dataclass
class Run:
    """Start processes, wait for all of them (blocking waitpid: no polling step in the
    measurement), and leave nothing behind: a watchdog stops them after ``timeout``."""

    timeout: float
    tag: str = field(default_factory=lambda: uuid.uuid4().hex)
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    timed_out: bool = False
    leaked: list[int] = field(default_factory=list)

    def env(self, **extra: str) -> dict[str, str]:
        return {**base_env(), TAG: self.tag, **extra}

    def start(self, argv: list[str], cwd: Path, env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
        with open(log, "wb") as out:
            proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=subprocess.STDOUT, process_group=0)
        self.procs.append(proc)
        return proc

    def _stop(self) -> None:
        """SIGTERM each process group (distcomp then stops its ranks), SIGKILL after 10 s."""
        self.timed_out = True
        for sig, pause in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 0.0)):
            live = [p for p in self.procs if p.poll() is None]
            for p in live:
                try:
                    os.killpg(p.pid, sig)
                except (ProcessLookupError, PermissionError):
                    pass
            end = time.monotonic() + pause
            while any(p.poll() is None for p in live) and time.monotonic() < end:
                time.sleep(0.05)

    def __enter__(self) -> "Run":
        self._watchdog = threading.Timer(self.timeout, self._stop)
        self._watchdog.daemon = True
        self._watchdog.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._watchdog.cancel()
        if any(p.poll() is None for p in self.procs):  # an error or Ctrl-C on our side
            self._stop()
        for p in self.procs:
            p.wait()
        # whatever a launcher left running: report it, then kill it by its pid
        self.leaked = tagged(self.tag)
        for pid in self.leaked:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        end = time.monotonic() + 5
        while tagged(self.tag) and time.monotonic() < end:
            time.sleep(0.05)


# -- the variants: each returns the number measured (seconds) ---------------------------------

Variant = Callable[[Path, float], float]  # (temp folder, timeout) -> the number measured
Go = Callable[[Path, float, dict[str, str]], tuple[float, Path, float]]  # -> (wall s, run dir or log, end time)


def _counted(logs: list[Path], what: str, expected: int = 2) -> None:
    found = sum(p.read_bytes().count(OK_LINE) for p in logs if p.exists())
    if found != expected:
        raise RunError(f"{what}: {found} rank(s) reported the all-reduce, expected {expected}")


def _distcomp(job: str, expect_rc: int, *flags: str, spec: str = "component.yaml") -> Go:
    """``distcomp run`` of ``spec`` in ``benchmarks/jobs/JOB`` (a spec file, or ``FILE.py:FUNCTION``)."""
    def go(tmp: Path, timeout: float, extra: dict[str, str]) -> tuple[float, Path, float]:
        run_dir = tmp / "run"
        log = tmp / "distcomp.log"
        with Run(timeout) as run:
            start = time.perf_counter()
            proc = run.start([sys.executable, "-m", "distcomp", "run", str(JOBS / job / spec), *flags,
                              "--quiet", "--no-tracking", "--run-dir", str(run_dir)], ROOT, run.env(**extra), log)
            rc = proc.wait()
            end_wall = time.time()
            elapsed = time.perf_counter() - start
        _check(run, rc, expect_rc, "distcomp run", log)
        return elapsed, run_dir, end_wall
    return go


def _raw(argv: list[str], job: str, expect_rc: int) -> Go:
    def go(tmp: Path, timeout: float, extra: dict[str, str]) -> tuple[float, Path, float]:
        log = tmp / "raw.log"
        with Run(timeout) as run:
            start = time.perf_counter()
            proc = run.start(argv, JOBS / job, run.env(**extra), log)
            rc = proc.wait()
            end_wall = time.time()
            elapsed = time.perf_counter() - start
        _check(run, rc, expect_rc, argv[0], log)
        return elapsed, log, end_wall
    return go


def _check(run: Run, rc: int, expect_rc: int, what: str, log: Path) -> None:
    if run.timed_out:
        raise RunError(f"{what} ran past {run.timeout:g} s and was stopped; log:\n{tail(log)}")
    if run.leaked:
        raise RunError(f"{what} left {len(run.leaked)} process(es) running after it exited "
                       f"(pids {run.leaked}; killed); log:\n{tail(log)}")
    if (rc == 0) != (expect_rc == 0):
        raise RunError(f"{what} exited {rc}, expected {'0' if expect_rc == 0 else 'non-zero'}; log:\n{tail(log)}")


def allreduce(go: Go, what: str, ranks: int = 2) -> Variant:
    def measure(tmp: Path, timeout: float) -> float:
        elapsed, where, _ = go(tmp, timeout, {})
        logs = sorted((where / "logs").glob("*.log")) if where.is_dir() else [where]
        _counted(logs, what, ranks)
        return elapsed
    return measure


def _stamps(where: Path, what: str, ranks: int) -> list[int]:
    """The wall clock (ns) each rank printed, one per rank (rank0.log... in a run folder, or one log)."""
    logs = [where / "logs" / f"rank{r}.log" for r in range(ranks)] if where.is_dir() else [where]
    out = []
    for log in logs:
        stamps = [line for line in log.read_text().splitlines() if line.strip().isdigit()] if log.exists() else []
        if not stamps:
            raise RunError(f"{what}: the rank printed no time; log:\n{tail(log)}")
        out.append(int(stamps[-1]))
    return out


def started(go: Go, what: str, extra: dict[str, str] | None = None, ranks: int = 1) -> Variant:
    """Seconds from starting the command to its ranks running: each rank prints the wall clock
    (ns); the latest counts (every rank is running then)."""
    def measure(tmp: Path, timeout: float) -> float:
        began = time.time()
        _, where, _ = go(tmp, timeout, extra or {})
        return max(_stamps(where, what, ranks)) / 1e9 - began
    return measure


def whole(go: Go, what: str, ranks: int) -> Variant:
    """The whole job's wall time; each rank must have printed its time."""
    def measure(tmp: Path, timeout: float) -> float:
        elapsed, where, _ = go(tmp, timeout, {})
        _stamps(where, what, ranks)
        return elapsed
    return measure


def failure(go: Go, what: str) -> Variant:
    def measure(tmp: Path, timeout: float) -> float:
        stamp = tmp / "rank1-exit"
        _, _, ended = go(tmp, timeout, {"BENCH_FAIL_STAMP": str(stamp)})
        try:
            exited = float(stamp.read_text())
        except (OSError, ValueError):
            raise RunError(f"{what}: rank 1 did not write its exit time to {stamp}") from None
        return ended - exited
    return measure


def tf_by_hand(tmp: Path, timeout: float) -> float:
    """Two workers with their TF_CONFIG on free localhost ports, started as a user would."""
    ports = free_ports(2)
    cluster = {"worker": [f"127.0.0.1:{p}" for p in ports]}
    logs = [tmp / f"worker{i}.log" for i in range(2)]
    with Run(timeout) as run:
        start = time.perf_counter()
        procs = [run.start(["python", "script.py"], JOBS / "tf_allreduce",
                           run.env(TF_CONFIG=json.dumps({"cluster": cluster, "task": {"type": "worker", "index": i}}),
                                   CUDA_VISIBLE_DEVICES="-1"), logs[i])
                 for i in range(2)]
        codes = [p.wait() for p in procs]
        elapsed = time.perf_counter() - start
    if run.timed_out or run.leaked or any(codes):
        raise RunError(f"hand-spawned TF workers: exit codes {codes}"
                       + (f", stopped after {timeout:g} s" if run.timed_out else "")
                       + (f", left pids {run.leaked} running" if run.leaked else "")
                       + "".join(f"\n  {log.name}:\n{tail(log)}" for log in logs))
    _counted(logs, "hand-spawned TF workers")
    return elapsed


@dataclass
class Bench:
    key: str
    name: str
    ours: Variant
    raw: Variant
    raw_label: str
    judge: Judge
    rounds: int
    ours_s: list[float] = field(default_factory=list)
    raw_s: list[float] = field(default_factory=list)
    ours_cpu: list[float] = field(default_factory=list)
    raw_cpu: list[float] = field(default_factory=list)
    error: str = ""


def benches(rounds: int, tf_rounds: int, skip_tf: bool) -> list[Bench]:
    # the goals are issue 23's: torch <= 0.55 x torchrun, mpi <= 1.05 x mpirun, 2x2 <= 0.5 x TorchX,
    # failure-to-end <= 0.1 s, distcomp's own start <= 60 ms; issue 25's: a function job <= +50 ms over its YAML twin
    # plain names, found on the PATH that base_env() gives: the venv's, as for distcomp's ranks
    torchrun = ["torchrun", "--standalone", "--nproc-per-node", "2", "script.py"]
    mpirun = ["mpirun", "--allow-run-as-root", "-np", "2", "python", "script.py"]
    out = [
        Bench("torch", "torch all-reduce, 2 ranks", allreduce(_distcomp("torch_allreduce", 0), "distcomp torch"),
              allreduce(_raw(torchrun, "torch_allreduce", 0), "torchrun"), "torchrun", ratio_at_most(0.50), rounds),
        Bench("mpi", "mpi4py all-reduce, 2 procs", allreduce(_distcomp("mpi_allreduce", 0), "distcomp mpi"),
              allreduce(_raw(mpirun, "mpi_allreduce", 0), "mpirun"), "mpirun", ratio_at_most(1.05), rounds),
    ]
    if not skip_tf:
        out.append(Bench("tf", "tf MWMS all-reduce, 2 workers", allreduce(_distcomp("tf_allreduce", 0), "distcomp tf"),
                         tf_by_hand, "TF_CONFIG by hand", ratio_at_most(1.05),
                         min(rounds, tf_rounds)))
    out.append(Bench("fail", "failure-to-end (rank 1 exits 1)",
                     failure(_distcomp("torch_fail", 1), "distcomp torch_fail"),
                     failure(_raw(torchrun, "torch_fail", 1), "torchrun torch_fail"), "torchrun", seconds_at_most(0.1), rounds))
    # issue 26: the first failing MPI rank ends the job within a second (distcomp's rank watcher)
    out.append(Bench("mpifail", "mpi failure-to-end (rank 1 sys.exit(1))",
                     failure(_distcomp("mpi_fail", 1), "distcomp mpi_fail"),
                     failure(_raw(mpirun, "mpi_fail", 1), "mpirun mpi_fail"), "mpirun", seconds_at_most(1.0), rounds))
    if (BIN / "torchx").exists():
        torchx = ["torchx", "run", "-s", "local_cwd", "dist.ddp", "-j", "2x2", "--script", "script.py"]
        out.append(Bench("torchx", "torch all-reduce, 2 nodes x 2",
                         allreduce(_distcomp("torch_allreduce", 0, "--nodes", "2", "--nproc-per-node", "2"),
                                   "distcomp torch 2x2", 4),
                         allreduce(_raw(torchx, "torch_allreduce", 0), "torchx 2x2", 4), "torchx local_cwd",
                         ratio_at_most(0.45), rounds))
    else:
        print("note: torchx is not installed, so the 2x2 row against TorchX is left out "
              "(pip install --no-deps torchx==0.7.0 pyre-extensions typing-inspect)", file=sys.stderr)
    out.append(Bench("start", "distcomp run's own start", started(_distcomp("start", 0), "distcomp start"),
                     started(_raw(["date", "+%s%N"], "start", 0), "date"), "date started directly",
                     seconds_at_most(0.06), rounds))
    out.append(Bench("cgroup", "distcomp run's own start with a cgroup per job",
                     started(_distcomp("start", 0), "distcomp start"),
                     started(_distcomp("start", 0), "distcomp start, DISTCOMP_CGROUP=off", {"DISTCOMP_CGROUP": "off"}),
                     "the same without one (DISTCOMP_CGROUP=off)", ratio_at_most(1.1), rounds))
    out.append(Bench("yamlcache", "distcomp run's own start, the spec's parse kept",
                     started(_distcomp("start", 0), "distcomp start"),
                     started(_distcomp("start", 0), "distcomp start, DISTCOMP_YAML_CACHE=off",
                             {"DISTCOMP_YAML_CACHE": "off"}),
                     "the same parsing with PyYAML (DISTCOMP_YAML_CACHE=off)", ratio_at_most(1.0), rounds))
    # issue 25: a function component against the same job as YAML (the same folder, the same 2 ranks)
    function = _distcomp("fn_start", 0, spec="start_fn.py:start")
    yaml = _distcomp("fn_start", 0)
    out.append(Bench("fnstart", "function job's start, 2 ranks", started(function, "distcomp function", ranks=2),
                     started(yaml, "distcomp YAML", ranks=2), "the same job as YAML", added_at_most(0.05), rounds))
    out.append(Bench("fnwall", "function job, whole wall, 2 ranks", whole(function, "distcomp function", 2),
                     whole(yaml, "distcomp YAML", 2), "the same job as YAML", added_at_most(0.05), rounds))
    torch_yaml = allreduce(_distcomp("torch_allreduce", 0), "distcomp YAML all-reduce")
    out.append(Bench("fntorch", "function torch all-reduce, 2 ranks",
                     allreduce(_distcomp("torch_allreduce", 0, spec="allreduce_fn.py:allreduce"), "distcomp function"),
                     torch_yaml, "the same job as YAML", added_at_most(0.05), rounds))
    out.append(Bench("fntop", "the same, torch imported at the top",
                     allreduce(_distcomp("torch_allreduce", 0, spec="allreduce_top.py:allreduce"), "distcomp function"),
                     torch_yaml, "the same job as YAML", added_at_most(0.05), rounds))
    return out


def children_cpu() -> float:
    """CPU seconds (user + system) of every process this one has waited for, and theirs."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def measure(bench: Bench, which: str, tmp_root: Path, timeout: float, keep: bool) -> None:
    variant = bench.ours if which == "ours" else bench.raw
    with tempfile.TemporaryDirectory(prefix=f"{which}-", dir=tmp_root) as tmp:
        try:
            cpu = children_cpu()
            value = variant(Path(tmp), timeout)
            cpu = children_cpu() - cpu
        except RunError as exc:
            side = "distcomp run" if which == "ours" else bench.raw_label
            bench.error = f"{bench.name} ({side}): {exc}"
            print(f"  ERROR {bench.error}", file=sys.stderr, flush=True)
            return
    if keep:
        (bench.ours_s if which == "ours" else bench.raw_s).append(value)
        (bench.ours_cpu if which == "ours" else bench.raw_cpu).append(cpu)


def _terminate(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)  # unwinds through Run.__exit__: the running job is stopped


def main() -> int:
    signal.signal(signal.SIGTERM, _terminate)
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5, help="measured rounds (default 5)")
    ap.add_argument("--tf-rounds", type=int, default=3, help="rounds for TensorFlow, ~10-17 s a run (default 3)")
    ap.add_argument("--skip-tf", action="store_true", help="leave the TensorFlow pair out")
    ap.add_argument("--only", metavar="KEYS", help="comma-separated subset of: torch,mpi,tf,fail,mpifail,torchx,start,cgroup,yamlcache,fnstart,fnwall "
                                                ",fntorch,fntop (default all)")
    ap.add_argument("--warmup", type=int, default=1, help="unmeasured rounds first, to warm the page cache (default 1)")
    ap.add_argument("--timeout", type=float, default=180.0, help="seconds before one run is stopped (default 180)")
    ap.add_argument("--pycache", action="store_true",
                    help="cache bytecode in a temporary PYTHONPYCACHEPREFIX for every process of both sides "
                         "(as a normal install has it) even where PYTHONDONTWRITEBYTECODE is set, and distcomp's "
                         "own caches in a temporary XDG_CACHE_HOME")
    ap.add_argument("--check", action="store_true", help="exit 1 if a goal is missed")
    args = ap.parse_args()
    if args.rounds < 1 or args.tf_rounds < 1 or args.warmup < 0:
        ap.error("--rounds and --tf-rounds must be >= 1, --warmup >= 0")

    todo = benches(args.rounds, args.tf_rounds, args.skip_tf)
    if args.only:
        keys = {k.strip() for k in args.only.split(",") if k.strip()}
        known = {"torch", "mpi", "tf", "fail", "mpifail", "torchx", "start", "cgroup", "yamlcache", "fnstart", "fnwall", "fntorch", "fntop"}
        unknown = keys - known
        if unknown:
            ap.error(f"--only: unknown {', '.join(sorted(unknown))} (expected {', '.join(sorted(known))})")
        todo = [b for b in todo if b.key in keys]
    tf = next((str(b.rounds) for b in todo if b.key == "tf"), "skipped")
    print(f"rounds: {args.rounds} (tf: {tf}), "
          f"warm-up: {args.warmup}, cores: {os.cpu_count()}, python: {sys.executable}", flush=True)
    load0 = load()
    t0 = time.monotonic()
    if os.environ.get("PYTHONDONTWRITEBYTECODE") and not args.pycache:
        print("note: PYTHONDONTWRITEBYTECODE is set, so modules without a .pyc already (distcomp's own, "
              "an editable install) are compiled on every run; --pycache measures with a bytecode cache")
    with tempfile.TemporaryDirectory(prefix="distcomp-launch-bench-") as tmp_root:
        if args.pycache:  # and distcomp's own caches (entry points, the records' methods), fresh, warmed alike
            ENV_OVERRIDES.update(PYTHONDONTWRITEBYTECODE=None, PYTHONPYCACHEPREFIX=str(Path(tmp_root) / "pycache"),
                                 XDG_CACHE_HOME=str(Path(tmp_root) / "cache"))
            if args.warmup < 1:
                print("note: --pycache without --warmup: the first round also compiles every module")
        for i in range(-args.warmup, args.rounds):
            label = f"warm-up {i + args.warmup + 1}" if i < 0 else f"round {i + 1}/{args.rounds}"
            print(f"{label} ({time.monotonic() - t0:.0f} s)", file=sys.stderr, flush=True)
            for bench in todo:
                if bench.error or i >= bench.rounds:
                    continue
                order = ("ours", "raw") if i % 2 == 0 else ("raw", "ours")  # alternate who goes first
                for which in order:
                    if not bench.error:
                        measure(bench, which, Path(tmp_root), args.timeout, keep=i >= 0)

    return finish([Row(b.name, b.raw_label, b.ours_s, b.raw_s, b.judge, b.error,
                       {"CPU s, distcomp side": b.ours_cpu, f"CPU s, {b.raw_label}": b.raw_cpu}, key=b.key) for b in todo],
                  load0, time.monotonic() - t0, args.check)


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:  # the running job was stopped on the way out (Run.__exit__)
        print("interrupted", file=sys.stderr)
        sys.exit(130)
