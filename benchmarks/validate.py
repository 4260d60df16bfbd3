"""Whole-process time of `distcomp validate` on a component, against the raw tools side by side.

Each command runs as a fresh process (what a user or an editor hook pays), REPEAT times in
interleaved order; medians are printed. Goal: distcomp validate <= 0.3 s on 2 cores.

Then the curve: validate of generated specs with 1,000 / 10,000 / 20,000 inputs, each referenced
by the command, beside yaml.safe_load of the same file. Goal: linear (20k takes at most 2.5x
10k; a quadratic validate takes 4x, as it did before it was fixed: 10k 6.4 s, 20k 26 s).

The rows are written as JSON too (benchmarks/results/validate.json; _report.record).

    python benchmarks/validate.py [--repeat N] [--scale-repeat N] [SPEC]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from _report import Row, load, ratio_at_most, record, seconds_at_most, wall  # benchmarks/_report.py

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_SPEC = ROOT / "examples" / "pytorch-ddp" / "component.yaml"
AZURE = ("import sys; from azure.ai.ml import load_component; "
         "sys.exit(0 if load_component(sys.argv[1])._validate().passed else 2)")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("spec", nargs="?", default=str(DEFAULT_SPEC))
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--azure-repeat", type=int, default=5, help="azure-ai-ml is slow; fewer runs")
    ap.add_argument("--scale-repeat", type=int, default=3, help="runs per size of the curve (0: skip it)")
    args = ap.parse_args()
    load0, t0 = load(), time.perf_counter()
    env = {**os.environ, "AZURE_ML_INTERNAL_COMPONENTS_ENABLED": "true"}
    exe = str(Path(sys.executable).with_name("distcomp"))
    commands = {
        "python -c pass (interpreter start)": [sys.executable, "-c", "pass"],
        "python: yaml.safe_load only": [sys.executable, "-c", "import sys, yaml; yaml.safe_load(open(sys.argv[1]))", args.spec],
        "distcomp validate": [exe, "validate", "-q", args.spec],
        "azure-ai-ml load_component()._validate()": [sys.executable, "-c", AZURE, args.spec],
    }
    times: dict[str, list[float]] = {name: [] for name in commands}
    for i in range(args.repeat):
        for name, argv in commands.items():
            if name.startswith("azure") and i >= args.azure_repeat:
                continue
            times[name].append(wall(argv, env))
    med = {name: statistics.median(t) for name, t in times.items()}
    ours = med["distcomp validate"]
    print(f"spec: {args.spec}   runs: {args.repeat} (azure: {min(args.repeat, args.azure_repeat)})")
    for name, m in med.items():
        print(f"  {name:<44} median {m * 1000:7.1f} ms   min {min(times[name]) * 1000:7.1f} ms")
    print(f"ratio distcomp validate / azure-ai-ml validate: {ours / med['azure-ai-ml load_component()._validate()']:.3f}")
    print(f"ratio distcomp validate / yaml.safe_load alone: {ours / med['python: yaml.safe_load only']:.2f}")
    print(f"goal <= 300 ms: {'met' if ours <= 0.3 else 'MISSED'} ({ours * 1000:.0f} ms)")
    azure, safe = "azure-ai-ml load_component()._validate()", "python: yaml.safe_load only"
    rows = [Row("validate, whole process", "azure-ai-ml _validate()", times["distcomp validate"], times[azure],
                seconds_at_most(0.3), key="validate"),
            Row("validate, whole process (vs PyYAML)", "yaml.safe_load", times["distcomp validate"], times[safe], None,
                key="validate-yaml")]
    if args.scale_repeat:
        rows += curve(exe, env, args.scale_repeat)
    record(rows, load0, time.perf_counter() - t0)


def many_inputs(n: int) -> str:
    """A spec with ``n`` Integer inputs, every one referenced by the (folded) command."""
    lines = ["name: many", "type: DistributedComponent", "inputs:"]
    lines += [f"  in{i}: {{type: Integer, default: {i}, min: 0}}" for i in range(n)]
    lines += ["launcher:", "  type: mpi", "  additional_arguments: >-", "    python train.py"]
    lines += ["    " + " ".join(f"--in{i} {{inputs.in{i}}}" for i in range(k, min(n, k + 10))) for k in range(0, n, 10)]
    return "\n".join(lines) + "\n"


def curve(exe: str, env: dict[str, str], repeat: int) -> list[Row]:
    """validate time against the number of inputs, beside yaml.safe_load of the same file."""
    sizes, med, runs, rows = (1_000, 10_000, 20_000), {}, {}, []
    print(f"\nvalidate of a spec with N inputs, each referenced by the command (runs: {repeat})")
    with tempfile.TemporaryDirectory(prefix="distcomp-bench-validate-") as tmp:
        for n in sizes:
            spec = Path(tmp) / f"many{n}.yaml"
            spec.write_text(many_inputs(n), encoding="utf-8")
            load = [sys.executable, "-c", "import sys, yaml; yaml.safe_load(open(sys.argv[1]))", str(spec)]
            ours, raw = [], []
            for _ in range(repeat):
                ours.append(wall([exe, "validate", "-q", str(spec)], env))
                raw.append(wall(load, env))
            med[n], runs[n] = statistics.median(ours), ours
            safe = statistics.median(raw)
            rows.append(Row(f"validate, {n:,} inputs", "yaml.safe_load", ours, raw, None, key=f"inputs-{n // 1000}k"))
            print(f"  {n:>6} inputs: distcomp validate median {med[n]:6.2f} s ({med[n] / n * 1e6:5.0f} us per input)"
                  f"   yaml.safe_load {safe:6.2f} s   ratio {med[n] / safe:.2f}")
    growth = med[20_000] / med[10_000]
    print(f"growth 10k -> 20k inputs: x{growth:.2f} (linear x2, quadratic x4); "
          f"goal <= x2.5: {'met' if growth <= 2.5 else 'MISSED'}")
    rows.append(Row("validate, 20k inputs against 10k (linear: 2)", "validate, 10k inputs", runs[20_000], runs[10_000],
                    ratio_at_most(2.5), key="growth"))
    return rows


if __name__ == "__main__":
    try:
        main()
    except RuntimeError as exc:  # a command failed: say which, without a traceback
        raise SystemExit(str(exc)) from None
