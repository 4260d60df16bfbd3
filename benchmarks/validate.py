"""Whole-process time of `distcomp validate` on a component, against the raw tools side by side.

Each command runs as a fresh process (what a user or an editor hook pays), REPEAT times in
interleaved order; medians are printed. Goal: distcomp validate <= 0.3 s on 2 cores.

    python benchmarks/validate.py [--repeat N] [SPEC]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

from _report import wall  # benchmarks/_report.py

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_SPEC = ROOT / "examples" / "pytorch-ddp" / "component.yaml"
AZURE = ("import sys; from azure.ai.ml import load_component; "
         "sys.exit(0 if load_component(sys.argv[1])._validate().passed else 2)")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("spec", nargs="?", default=str(DEFAULT_SPEC))
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--azure-repeat", type=int, default=5, help="azure-ai-ml is slow; fewer runs")
    args = ap.parse_args()
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


if __name__ == "__main__":
    try:
        main()
    except RuntimeError as exc:  # a command failed: say which, without a traceback
        raise SystemExit(str(exc)) from None
