"""MLflow tracking from a distributed job: distcomp against plain MLflow, side by side.

Each round runs every variant once, as a fresh process, alternating which side goes first;
medians over the rounds are printed with their ratio to plain MLflow. Each measurement gets a
fresh run in a fresh SQLite store (a copy of one made up front), as `distcomp run` would make.

  (a) logging   N metric points (default 10,000) from rank 0. distcomp: seconds from the first
                distcomp.runtime.log_metric call until flush() returns, with everything durable
                in the store (the worker writes SQLite directly, no `import mlflow`). Plain
                MLflow: N mlflow.log_metric calls into the same kind of store, with `import mlflow`
                and start_run() left out of its time (they are printed apart). Goal: ratio <= 0.1.

  (b) job        wall time of `distcomp run` of a 2-rank torch job (benchmarks/jobs/), tracking
                on (a fresh SQLite store: the run created, the logs attached, the run ended)
                against --no-tracking, for a job that logs nothing (torch_allreduce: the
                launcher's cost) and one that logs 30 points and 2 params from rank 0
                (torch_logged: the ranks' cost too). Goal: <= 0.5 s added.

  (c) outage     a real `mlflow server` (its own SQLite database) stops for --outage seconds
                (default 20) while rank 0 logs --outage-points points (default 600, one every
                0.05 s; the server stops once a quarter of them are stored), then starts again
                on the same port and database. distcomp.runtime against plain mlflow.log_metric
                (MLflow's client retries each call with backoff, in the caller). Timed: the
                longest single logging call, what the training loop waited. Goal: every point
                logged by distcomp is in the run in the end (the process exits as usual: its
                exit flush delivers what it kept); how many plain MLflow kept is printed beside.

  (d) writer     what the direct SQLite writer (distcomp.mlstore._sqlite, MLflow's tables written with
                sqlite3) buys over MLflow's own store (SqlAlchemyStore, through distcomp's ClientStore)
                behind the same calls: a fresh process opens the store, creates a run (20 tags, 10
                params), logs N points (default 10,000) in batches of 1,000 as a rank's sender does and
                ends the run. Timed: the process's wall time, as the launcher and rank 0 pay it (the
                writes alone printed beside). Goal: ratio <= 0.2, or the writer goes (issue 23).

Every run's metric history is read back: a point missing is an error, not a fast run (in (c)
it is the goal). Parts are functions in PARTS (name -> function(args, store) -> list of
Result); add one there.

    python benchmarks/tracking.py [--part a|b|c|d] [--rounds N] [--points N] [--outage S] [--check]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from _report import Judge, Row, added_at_most, finish, load, ratio_at_most  # benchmarks/_report.py

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
LAUNCHER_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "NODE_RANK", "OMPI_", "PMI_",
                 "MPI_LOCAL", "TF_CONFIG", "PET_", "MASTER_", "AZ_BATCH", "MLFLOW_", "DISTCOMP_")


class RunError(Exception):
    """A measurement did not do what it should (exit code, missing points, timeout)."""


@dataclass
class Result:
    name: str
    raw_label: str
    goal: float  # ours / raw must be <= goal
    max_added_s: float | None = None  # instead: ours - raw must be <= this many seconds
    ours_s: list[float] = field(default_factory=list)
    raw_s: list[float] = field(default_factory=list)
    notes: dict[str, list[float]] = field(default_factory=dict)  # figures printed beside, not judged
    error: str = ""
    judge: Judge | None = None  # instead of the two above: a goal of its own
    key: str = ""  # the row's id in the JSON


class Stores:
    """Fresh SQLite stores, each a copy of a template made once (MLflow's schema set-up takes seconds)."""

    def __init__(self, root: Path) -> None:
        import mlflow  # the benchmark's own process only; what is measured runs apart

        self.root, self.mlflow = root, mlflow
        self.template = root / "template.db"
        client = mlflow.MlflowClient(f"sqlite:///{self.template}")
        self.experiment_id = client.create_experiment("bench", artifact_location=str(root / "template-artifacts"))
        self.count = 0

    def fresh(self) -> tuple[str, str, object]:
        """(tracking URI, run id, client) of a new run in a new store."""
        self.count += 1
        db = self.root / f"store{self.count}.db"
        shutil.copyfile(self.template, db)
        client = self.mlflow.MlflowClient(f"sqlite:///{db}")
        return f"sqlite:///{db}", client.create_run(self.experiment_id).info.run_id, client


def rank_env(uri: str, run_id: str, experiment_id: str) -> dict[str, str]:
    """What `distcomp run` gives rank 0 of 2: torchrun's contract and the MLflow run."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(LAUNCHER_VARS)}
    path = env.get("PATH", os.defpath).split(os.pathsep)
    env["PATH"] = os.pathsep.join([str(BIN), *[p for p in path if p != str(BIN)]])
    env.update(RANK="0", WORLD_SIZE="2", LOCAL_RANK="0", LOCAL_WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
               MASTER_PORT="29500", MLFLOW_RUN_ID=run_id, DISTCOMP_MLFLOW_RUN_ID=run_id, MLFLOW_TRACKING_URI=uri,
               MLFLOW_EXPERIMENT_ID=experiment_id,
               MLFLOW_DISABLE_TELEMETRY="true")  # nothing leaves the machine; same for both sides
    return env


def run_json(code: str, env: dict[str, str], timeout: float) -> dict:
    try:
        proc = subprocess.run([sys.executable, "-c", code], check=False, env=env, capture_output=True, text=True,
                              timeout=timeout, cwd=ROOT)
    except subprocess.TimeoutExpired:
        raise RunError(f"ran past {timeout:g} s") from None
    if proc.returncode != 0 or not proc.stdout.strip():
        raise RunError(f"exited {proc.returncode}; stderr:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


# -- part (a): metric logging --------------------------------------------------------------------

OURS_LOGGING = """
import json, time
import distcomp.runtime as rt
start = time.perf_counter()
for i in range({n}):
    rt.log_metric("loss", 1.0 / (i + 1), step=i)
queued = time.perf_counter() - start
ok = rt.flush()
print(json.dumps({{"s": time.perf_counter() - start, "queued_s": queued, "flushed": ok}}))
"""

RAW_LOGGING = """
import json, time
start = time.perf_counter()
import mlflow
mlflow.start_run()  # resumes the launcher's run (MLFLOW_RUN_ID), as a rank using MLflow directly would
ready = time.perf_counter()
for i in range({n}):
    mlflow.log_metric("loss", 1.0 / (i + 1), step=i)
end = time.perf_counter()
print(json.dumps({{"s": end - ready, "setup_s": ready - start}}))
"""


def bench_logging(args: argparse.Namespace, stores: Stores) -> list[Result]:
    n = args.points
    result = Result(f"(a) {n:,} metric points", "mlflow.log_metric", 0.1,
                    notes={"distcomp: calls queued in": [], "plain: import + start_run": []}, key="logging")
    for i in range(-args.warmup, args.rounds):
        print(f"  (a) {'warm-up' if i < 0 else f'round {i + 1}/{args.rounds}'}", file=sys.stderr, flush=True)
        for which in (("ours", "raw") if i % 2 == 0 else ("raw", "ours")):
            uri, run_id, client = stores.fresh()
            env = rank_env(uri, run_id, stores.experiment_id)
            try:
                out = run_json((OURS_LOGGING if which == "ours" else RAW_LOGGING).format(n=n), env, args.timeout)
                points = len(client.get_metric_history(run_id, "loss"))
                if points != n or (which == "ours" and not out["flushed"]):
                    raise RunError(f"{points} of {n} points in the store after the run")
            except RunError as exc:
                result.error = f"{'distcomp' if which == 'ours' else 'mlflow'}: {exc}"
                return [result]
            if i < 0:
                continue
            if which == "ours":
                result.ours_s.append(out["s"])
                result.notes["distcomp: calls queued in"].append(out["queued_s"])
            else:
                result.raw_s.append(out["s"])
                result.notes["plain: import + start_run"].append(out["setup_s"])
    return [result]


# -- part (b): a whole job, tracking on against --no-tracking -----------------------------------

def bench_job(args: argparse.Namespace, stores: Stores) -> list[Result]:
    results = []
    for job, label, key in (("torch_allreduce", "logs nothing", "job"), ("torch_logged", "logs 30 points", "job-logged")):
        spec = ROOT / "benchmarks" / "jobs" / job / "component.yaml"
        result = Result(f"(b) 2-rank job, {label}", "--no-tracking", float("inf"), max_added_s=0.5, key=key)
        results.append(result)
        for i in range(-args.warmup, args.rounds):
            print(f"  (b) {job} {'warm-up' if i < 0 else f'round {i + 1}/{args.rounds}'}", file=sys.stderr, flush=True)
            for which in (("ours", "raw") if i % 2 == 0 else ("raw", "ours")):
                uri, _run, client = stores.fresh()
                env = {k: v for k, v in os.environ.items() if not k.startswith(LAUNCHER_VARS)}
                env.update(MLFLOW_TRACKING_URI=uri, MLFLOW_DISABLE_TELEMETRY="true")
                run_dir = stores.root / f"job{stores.count}"
                argv = [sys.executable, "-m", "distcomp", "run", str(spec), "--quiet", "--run-dir", str(run_dir)]
                argv += ["--experiment", "bench-job"] if which == "ours" else ["--no-tracking"]
                start = time.perf_counter()
                try:
                    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=args.timeout,
                                          cwd=stores.root)
                except subprocess.TimeoutExpired:
                    result.error = f"{which}: ran past {args.timeout:g} s"
                    return results
                elapsed = time.perf_counter() - start
                exp = client.get_experiment_by_name("bench-job")
                runs = client.search_runs([exp.experiment_id]) if exp else []
                want = 1 if which == "ours" else 0
                if proc.returncode != 0 or len(runs) != want or (want and runs[0].info.status != "FINISHED"):
                    result.error = (f"{which}: exit {proc.returncode}, {len(runs)} MLflow run(s) (expected {want}); "
                                    f"stderr:\n{proc.stderr[-2000:]}")
                    return results
                if job == "torch_logged" and want and len(client.get_metric_history(runs[0].info.run_id, "loss")) != 10:
                    result.error = "the logged job's loss history is incomplete"
                    return results
                if i >= 0:
                    (result.ours_s if which == "ours" else result.raw_s).append(elapsed)
    return results


# -- part (c): a server outage while rank 0 logs ----------------------------------------------

OUTAGE_LOGGER = """
import json, sys, time
n, every, side = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
if side == "distcomp":
    import distcomp.runtime as rt
    log = rt.log_metric
else:
    import mlflow
    mlflow.start_run()  # resumes the launcher's run (MLFLOW_RUN_ID), as a rank using MLflow directly would
    log = mlflow.log_metric
longest = 0.0
for i in range(n):
    t = time.perf_counter()
    log("loss", 1.0 / (i + 1), step=i)
    longest = max(longest, time.perf_counter() - t)
    time.sleep(every)
print(json.dumps({"longest_s": longest}), flush=True)
"""


def outage_side(which: str, args: argparse.Namespace, stores: Stores) -> tuple[float, float, int]:
    """(longest logging call, the process's wall time, points in the run afterwards) of one side."""
    sys.path.insert(0, str(ROOT))
    from tests.tracking._server import Server  # a real server, stopped and started by its pid

    n = args.outage_points
    root = stores.root
    server = Server(root / f"outage-{which}").start()
    try:
        client = stores.mlflow.MlflowClient(server.uri)
        exp = client.create_experiment(f"outage-{which}")
        run_id = client.create_run(exp).info.run_id
        start = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-c", OUTAGE_LOGGER, str(n), "0.05", which], cwd=root, text=True,
                                env=rank_env(server.uri, run_id, exp), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            while len(client.get_metric_history(run_id, "loss")) < n // 4:
                if proc.poll() is not None:
                    raise RunError(f"{which} ended early: {proc.communicate()[1][-2000:]}")
                time.sleep(0.2)
            server.stop()
            print(f"  (c) {which}: server down for {args.outage:g} s", file=sys.stderr, flush=True)
            time.sleep(args.outage)
            server.start()
            out, err = proc.communicate(timeout=args.timeout)
        except subprocess.TimeoutExpired:
            raise RunError(f"{which} ran past {args.timeout:g} s") from None
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        wall = time.perf_counter() - start
        lines = [line for line in out.splitlines() if line.startswith("{")]  # MLflow prints its run's address too
        if proc.returncode != 0 or not lines:
            raise RunError(f"{which} exited {proc.returncode}: {err[-2000:]}")
        return json.loads(lines[-1])["longest_s"], wall, len(client.get_metric_history(run_id, "loss"))
    finally:
        server.stop()


def bench_outage(args: argparse.Namespace, stores: Stores) -> list[Result]:
    n = args.outage_points
    try:
        ours_s, ours_wall, ours_kept = outage_side("distcomp", args, stores)
        raw_s, raw_wall, raw_kept = outage_side("mlflow", args, stores)
    except RunError as exc:
        return [Result(f"(c) {args.outage:g} s outage", "mlflow.log_metric", 0.0, error=str(exc), key="outage")]
    return [Result(f"(c) {args.outage:g} s outage, longest call", f"mlflow {raw_kept}/{n} kept", 0.0, ours_s=[ours_s],
                   raw_s=[raw_s], notes={"distcomp wall": [ours_wall], "mlflow wall": [raw_wall]},
                   judge=lambda _ours, _raw: (ours_kept == n, f"{ours_kept}/{n} kept"), key="outage")]


# -- part (d): the direct SQLite writer against MLflow's own store ----------------------------

WRITER = """
import json, os, sys, time
start = time.perf_counter()
from distcomp.tracking import Metric
if sys.argv[1] == "sqlite":
    from distcomp.mlstore._sqlite import SqliteStore as Store
else:
    from distcomp.mlstore._client import ClientStore as Store
store = Store(os.environ["MLFLOW_TRACKING_URI"])
opened = time.perf_counter()
n = int(sys.argv[2])
run = store.create_run(store.experiment("bench-writer"), "job", {f"distcomp.tag{i}": "v" * 40 for i in range(20)},
                       {f"param{i}": str(i) for i in range(10)})
now = int(time.time() * 1000)
for first in range(0, n, 1000):
    store.log(run.run_id, {}, metrics=[Metric("loss", 1.0 / (i + 1), now + i, i) for i in range(first, min(n, first + 1000))])
store.terminate(run.run_id, "FINISHED")
end = time.perf_counter()
print(json.dumps({"run": run.run_id, "s": end - start, "write_s": end - opened}))
"""


def bench_writer(args: argparse.Namespace, stores: Stores) -> list[Result]:
    n = args.points
    result = Result(f"(d) store writes, {n:,} points", "MLflow's own store", 0.2,
                    notes={"distcomp: writes alone": [], "mlflow: writes alone": []}, key="writer")
    for i in range(-args.warmup, args.rounds):
        print(f"  (d) {'warm-up' if i < 0 else f'round {i + 1}/{args.rounds}'}", file=sys.stderr, flush=True)
        for which in (("sqlite", "mlflow") if i % 2 == 0 else ("mlflow", "sqlite")):
            uri, _run, client = stores.fresh()
            env = {k: v for k, v in os.environ.items() if not k.startswith(LAUNCHER_VARS)}
            env.update(MLFLOW_TRACKING_URI=uri, MLFLOW_DISABLE_TELEMETRY="true")
            start = time.perf_counter()
            try:
                out = run_json(WRITER.replace("sys.argv[1]", repr(which)).replace("sys.argv[2]", str(n)), env,
                               args.timeout)
            except RunError as exc:
                result.error = f"{which}: {exc}"
                return [result]
            wall_s = time.perf_counter() - start
            run = client.get_run(out["run"])
            points = len(client.get_metric_history(out["run"], "loss"))
            if points != n or run.info.status != "FINISHED" or len(run.data.params) != 10:
                result.error = f"{which}: {points} of {n} points, run {run.info.status}, {len(run.data.params)} params"
                return [result]
            if i >= 0:
                (result.ours_s if which == "sqlite" else result.raw_s).append(wall_s)
                result.notes[f"{'distcomp' if which == 'sqlite' else 'mlflow'}: writes alone"].append(out["write_s"])
    return [result]


PARTS: dict[str, Callable[[argparse.Namespace, Stores], list[Result]]] = {
    "a": bench_logging, "b": bench_job, "c": bench_outage, "d": bench_writer}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--part", action="append", choices=sorted(PARTS), help="part to run (repeatable; default all)")
    ap.add_argument("--rounds", type=int, default=3, help="measured rounds (default 3)")
    ap.add_argument("--warmup", type=int, default=1, help="unmeasured rounds first, to warm the page cache (default 1)")
    ap.add_argument("--points", type=int, default=10_000, help="(a), (d): metric points logged (default 10,000)")
    ap.add_argument("--outage", type=float, default=20.0, help="(c): seconds the server is away (default 20)")
    ap.add_argument("--outage-points", type=int, default=600, help="(c): metric points logged (default 600)")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds before one run is stopped (default 600)")
    ap.add_argument("--check", action="store_true", help="exit 1 if a goal is missed")
    args = ap.parse_args()
    if args.rounds < 1 or args.warmup < 0 or args.points < 1 or args.outage < 0 or args.outage_points < 4:
        ap.error("--rounds and --points must be >= 1, --outage-points >= 4, --warmup and --outage >= 0")
    parts = args.part or sorted(PARTS)
    print(f"parts: {', '.join(parts)}; rounds: {args.rounds}, warm-up: {args.warmup}, cores: {os.cpu_count()}, "
          f"python: {sys.executable}", flush=True)
    load0, t0 = load(), time.monotonic()
    results: list[Result] = []
    with tempfile.TemporaryDirectory(prefix="distcomp-tracking-bench-") as tmp:
        stores = Stores(Path(tmp))
        for part in parts:
            results += PARTS[part](args, stores)
    return finish([Row(r.name, r.raw_label, r.ours_s, r.raw_s, r.judge or (
                       added_at_most(r.max_added_s) if r.max_added_s is not None else ratio_at_most(r.goal)),
                       r.error, r.notes, key=r.key) for r in results], load0, time.monotonic() - t0, args.check)


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        sys.exit(130)
