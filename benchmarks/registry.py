"""Resolving references among 10,000 published versions of one component, in one process.

Publishes --versions versions (0.0.0 ... 99.99.0) of a tiny component (a spec and one file)
through the real publish path, one worker process per CPU, and deprecates the highest. Then
times whole calls of ``distcomp.registry.locate()`` in this process (parse the reference,
list the versions, read the deprecations, pick, verify the chosen version's hash):

    name@latest         -> 99.98.0
    name@^50            -> 50.99.0   (npm caret)
    name@>=10,<11       -> 10.99.0   (PEP 440)

against doing it by hand: os.scandir of the name folder, packaging's Version for every
entry, the SpecifierSet filter and max() (no deprecations, no hash check). Goal: each
locate() <= 20 ms (median of --repeat calls). Printed beside: the first call of the process
(empty caches), a fresh `python -c locate(...)` process, and the publish time per version.

Then the cost of running from the registry: `distcomp run NAME@1.0.0` against `distcomp run
FOLDER` of the same 100-file component (a spec and 99 Python files; the rank prints a line),
fresh processes taken in turns, --runs of each. The registry run re-hashes the stored version
and runs in a fresh copy of it, removed at the end. Goal: <= +50 ms. Printed beside: making and
removing that copy alone, in this process.

    python benchmarks/registry.py [--versions N] [--repeat N] [--runs N] [--only-runs] [--check]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from _report import Row, added_at_most, finish, load, seconds_at_most, wall  # benchmarks/_report.py

NAME = "bench-component"
SPEC = """\
name: bench-component
version: {version}
type: DistributedComponent
description: A tiny component published many times.
inputs:
  steps: {{type: Integer, default: 1}}
launcher:
  type: torch.distributed
  additional_arguments: python run.py --steps {{inputs.steps}}
code: .
"""
CASES = [("latest", "99.98.0", None), ("^50", "50.99.0", ">=50,<51"), (">=10,<11", "10.99.0", ">=10,<11")]


RUN_SPEC = """\
name: bench-run
version: 1.0.0
type: DistributedComponent
launcher:
  type: torch.distributed
  additional_arguments: python run.py
code: .
"""
RUN_FILES = 100  # the spec and 99 code files


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_cost(tmp: Path, runs: int) -> Row:
    """A registry run against a plain run of the same 100-file component (see the docstring)."""
    from distcomp.registry import open_registry, working_copy

    src, root, work = tmp / "run-src", tmp / "run-registry", tmp / "run-work"
    for n in range(RUN_FILES - 2):
        module = src / f"pkg{n % 10}" / f"mod{n}.py"
        module.parent.mkdir(parents=True, exist_ok=True)
        module.write_text(f"VALUE = {n}\n" + "# a line of code, roughly as long as a real one\n" * 40)
    (src / "component.yaml").write_text(RUN_SPEC)
    (src / "run.py").write_text("print('ran')\n")
    stored = Path(open_registry(str(root)).publish(src).location)
    work.mkdir()
    env = {**os.environ, "DISTCOMP_REGISTRY": str(root)}
    label = "distcomp run NAME@1.0.0 (100 files)"
    try:
        plain, ours, plain_cpu, ours_cpu = [], [], [], []
        for i in range(runs + 1):  # the first pair warms the caches and is not counted
            for spec, times, cpu in ((str(src), plain, plain_cpu), ("bench-run@1.0.0", ours, ours_cpu)):
                before = children_cpu()
                took = wall([sys.executable, "-m", "distcomp", "run", spec, "--no-tracking", "--run-dir",
                             f"run{i}-{'plain' if times is plain else 'registry'}"], env, work)
                if i:
                    times.append(took)
                    cpu.append(children_cpu() - before)
        copies, copies_cpu = [], []
        for i in range(max(runs, 10)):
            start, cpu = time.perf_counter(), time.process_time()
            copy = working_copy(stored, work / f"copy{i}")
            assert copy is not None and not copy.remove()
            copies.append(time.perf_counter() - start)
            copies_cpu.append(time.process_time() - cpu)
        # CPU seconds (user + system) are told beside: on a busy machine they vary less than wall time
        return Row(label, "run FOLDER", ours, plain, added_at_most(0.050),
                   notes={"CPU of the registry run (distcomp and its rank)": ours_cpu,
                          "CPU of the plain run": plain_cpu,
                          "the working copy alone: make + remove, in process": copies,
                          "the working copy alone, CPU": copies_cpu})
    except Exception as exc:  # report it in the table
        return Row(label, "run FOLDER", [], [], added_at_most(0.050), error=f"{type(exc).__name__}: {exc}")


def version(i: int) -> str:
    return f"{i // 100}.{i % 100}.0"


def publish_some(root: str, scratch: str, indexes: list[int]) -> float:
    """Publish these versions from one scratch folder; returns the seconds it took."""
    from distcomp.registry import open_registry

    registry = open_registry(root)
    folder = Path(scratch)
    folder.mkdir(parents=True)
    (folder / "run.py").write_text("print('hello')\n")
    start = time.perf_counter()
    for i in indexes:
        (folder / "component.yaml").write_text(SPEC.format(version=version(i)))
        registry.publish(folder)
    return time.perf_counter() - start


def by_hand(folder: Path, specifier: str | None) -> str:
    from packaging.specifiers import SpecifierSet
    from packaging.version import Version

    found = [Version(e.name) for e in os.scandir(folder) if not e.name.startswith(".")]
    if specifier:
        found = list(SpecifierSet(specifier).filter(found))
    else:
        found = [v for v in found if not v.is_prerelease]
    return str(max(found))


def timed(call, repeat: int) -> list[float]:  # type: ignore[no-untyped-def]
    out = []
    for _ in range(repeat):
        start = time.perf_counter()
        call()
        out.append(time.perf_counter() - start)
    return out


def options() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="locate() among many published versions")
    parser.add_argument("--versions", type=int, default=10_000, help="how many versions to publish (10,000)")
    parser.add_argument("--repeat", type=int, default=50, help="calls timed per reference (50)")
    parser.add_argument("--runs", type=int, default=7, help="registry and plain runs timed each (7)")
    parser.add_argument("--only-runs", action="store_true", help="only the registry run against the plain one")
    parser.add_argument("--check", action="store_true", help="exit 1 when a goal is missed")
    return parser.parse_args()


def main() -> int:
    args = options()
    before, t0 = load(), time.perf_counter()
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="distcomp-bench-registry-") as tmp:
        if args.only_runs:
            return finish([run_cost(Path(tmp), args.runs)], before, time.perf_counter() - t0, args.check)
        root = Path(tmp) / "registry"
        workers = os.cpu_count() or 1
        chunks = [list(range(w, args.versions, workers)) for w in range(workers)]
        start = time.perf_counter()
        with ProcessPoolExecutor(workers) as pool:
            spent = list(pool.map(publish_some, [str(root)] * workers,
                                  [str(Path(tmp) / f"src{w}") for w in range(workers)], chunks))
        publish_wall = time.perf_counter() - start
        per_version = [s / max(len(c), 1) for s, c in zip(spent, chunks)]
        print(f"published {args.versions} versions in {publish_wall:.1f} s with {workers} processes "
              f"({statistics.median(per_version) * 1000:.1f} ms per publish in each)\n")

        from distcomp.registry import locate, open_registry

        open_registry(str(root)).deprecate(f"{NAME}@{version(args.versions - 1)}", "benchmark: latest skips it")
        first = timed(lambda: locate(f"{NAME}@latest", str(root)), 1)  # empty caches
        for selector, expected, specifier in CASES:
            label = f"locate {NAME}@{selector}"
            try:
                got = locate(f"{NAME}@{selector}", str(root))
                if got.parent.name != expected:
                    raise RuntimeError(f"resolved {got.parent.name}, expected {expected}")
                ours = timed(lambda: locate(f"{NAME}@{selector}", str(root)), args.repeat)
                raw = timed(lambda: by_hand(root / NAME, specifier), args.repeat)
                notes = {}
                if selector == "latest":
                    code = f"from distcomp.registry import locate; locate('{NAME}@latest', {str(root)!r})"
                    notes = {"first locate of the process": first,
                             "fresh process: python -c locate()": [wall([sys.executable, "-c", code])
                                                                   for _ in range(3)],
                             "publish, per version": per_version}
                rows.append(Row(label, "scandir+Version", ours, raw, seconds_at_most(0.020), notes=notes))
            except Exception as exc:  # report it in the table
                rows.append(Row(label, "scandir+Version", [], [], seconds_at_most(0.020),
                                error=f"{type(exc).__name__}: {exc}"))
        rows.append(run_cost(Path(tmp), args.runs))
    return finish(rows, before, time.perf_counter() - t0, args.check)


if __name__ == "__main__":
    sys.exit(main())
