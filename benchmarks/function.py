"""Decorating and exporting a Python-function component in a 200-file project (issue 25).

A project is generated in a temporary folder (seeded, the same every time): ``train.py`` with
a ``@distcomp.component`` function that imports a sibling module, a package with subpackages
(``mylib/models``, ``mylib/data``, ``mylib/utils/io``...: modules of 0.5-40 KB), tests,
YAML configs, Markdown docs, a few JSON files (up to ~150 KB) and a ``.gitignore``: 200 files
shipped, plus what the .gitignore leaves out (3 checkpoints of 2 MB, a scratch folder).

Each round, in turns, fresh processes, timed from inside each (the interpreter's own start,
~20 ms, is outside and printed beside):

  distcomp   import train (which imports distcomp and decorates ``train``), then
             ``distcomp.export(train.train, OUT)``: component.yaml + code/ (its file count is
             checked after each round)                                          goal <= 100 ms
  raw        a plain copy of the same files: ``import shutil`` and ``shutil.copytree`` with
             the .gitignore's patterns

Printed beside: the CPU seconds of each (user + system: on a busy machine they vary less than
wall time; creating 200 files is mostly system time), the import + decoration alone, the export alone, the whole distcomp process
(wall), the same decorate + export with nothing kept (``DISTCOMP_YAML_CACHE=off``: a new or
changed function's first export, which imports PyYAML), and the wall of
``python -c "import distcomp"`` and of ``python -c pass``.

Bytecode is cached (a temporary PYTHONPYCACHEPREFIX, PYTHONDONTWRITEBYTECODE unset) as a
normal install has it, and so are distcomp's own (a temporary XDG_CACHE_HOME: the entry points,
the records' generated methods, the function's YAML text and its parse); one unmeasured round
first compiles, fills them and warms the page cache: the measured rounds export an unchanged function.
The job's start of a function against the same job written as YAML is in launch.py
(``--only fnstart,fnwall``).

    python benchmarks/function.py [--repeat N] [--check]
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _report import Row, begin, seconds_at_most, wall  # benchmarks/_report.py

FILES = 200
IGNORE = ("*.ckpt", "scratch", "__pycache__")  # the generated .gitignore, as shutil patterns
GITIGNORE = "*.ckpt\nscratch/\n__pycache__/\n"

TRAIN = '''\
"""Trains the model on every rank."""
import distcomp
from helpers import build_model


@distcomp.component(name="ddp-train", version="1.0.0", nproc_per_node=2)
def train(data: distcomp.Input, model: distcomp.Output, epochs: int = 3, lr: float = 0.01, optimizer: str = "adam",
          amp: bool = False):
    """Trains the model on every rank."""
    build_model(epochs, lr)
'''
HELPERS = "def build_model(epochs, lr):\n    return {'epochs': epochs, 'lr': lr}\n"

# each prints its wall seconds, then its CPU seconds (user + system, this process)
OURS = """\
import sys, time
t0, c0 = time.perf_counter(), time.process_time()
sys.path.insert(0, sys.argv[1])
import train
t1 = time.perf_counter()
import distcomp
distcomp.export(train.train, sys.argv[2])
t2 = time.perf_counter()
print(t1 - t0, t2 - t1, time.process_time() - c0)
"""
RAW = """\
import sys, time
t0, c0 = time.perf_counter(), time.process_time()
import shutil
shutil.copytree(sys.argv[1], sys.argv[2], ignore=shutil.ignore_patterns(*sys.argv[3:]))
print(time.perf_counter() - t0, time.process_time() - c0)
"""


def _python(rng: random.Random, size: int, name: str) -> str:
    """Valid Python of about ``size`` bytes: functions with a docstring and a few lines each."""
    out = [f'"""{name}: generated for the benchmark."""\n', "import os\n\n"]
    n = 0
    while sum(len(x) for x in out) < size:
        out.append(f"\ndef step_{n}(values, scale={rng.random():.4f}):\n"
                   f'    """Scales the values by {n}; a docstring line as long as a real one."""\n'
                   f"    total = sum(v * scale for v in values if v is not None)\n"
                   f"    return os.environ.get('STEP_{n}', total)\n")
        n += 1
    return "".join(out)


def _text(rng: random.Random, size: int, line: str) -> str:
    lines: list[str] = []
    while sum(len(x) for x in lines) < size:
        lines.append(line.format(n=len(lines), x=rng.randint(0, 10**6)))
    return "".join(lines)


def make_project(root: Path) -> int:
    """Write the project; returns how many files export must ship (FILES)."""
    rng = random.Random(25)
    files: dict[str, str] = {"train.py": TRAIN, "helpers.py": HELPERS, ".gitignore": GITIGNORE,
                             "README.md": _text(rng, 6000, "Line {n} of the project's readme, {x}.\n"),
                             "pyproject.toml": '[project]\nname = "bench-project"\nversion = "0.1.0"\n',
                             "requirements.txt": "torch\nnumpy\npyyaml\n"}
    packages = ["mylib", "mylib/models", "mylib/data", "mylib/utils", "mylib/utils/io", "mylib/train"]
    for pkg in packages:
        files[f"{pkg}/__init__.py"] = f'"""{pkg}."""\n'
    for i in range(30):
        files[f"tests/test_part{i}.py"] = _python(rng, rng.randint(800, 6000), f"test_part{i}")
    for i in range(20):
        files[f"configs/exp{i}.yaml"] = _text(rng, rng.randint(300, 3000), "key_{n}: {x}\n")
    for i in range(15):
        files[f"docs/page{i}.md"] = _text(rng, rng.randint(1000, 12000), "Paragraph {n}: {x} words of prose.\n")
    for i in range(8):
        files[f"data/table{i}.json"] = "[" + _text(rng, rng.randint(2000, 150000), '{{"id": {n}, "v": {x}}},\n') + "{}]\n"
    i = 0
    while len(files) < FILES:  # the rest: modules across the packages, lognormal sizes (median ~4 KB)
        pkg = packages[i % len(packages)]
        size = int(min(40000, max(500, rng.lognormvariate(8.3, 0.9))))
        files[f"{pkg}/mod{i}.py"] = _python(rng, size, f"{pkg}.mod{i}")
        i += 1
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    # left out by the .gitignore: export and the plain copy must both skip them
    for i in range(3):
        (root / f"model{i}.ckpt").write_bytes(os.urandom(2 << 20))
    for i in range(20):
        (root / "scratch" / f"run{i}.log").parent.mkdir(exist_ok=True)
        (root / "scratch" / f"run{i}.log").write_text("scratch\n" * 100)
    return len(files)


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, list[float]]:
    """The process's wall time and the numbers it printed."""
    start = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, env=env)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[:3])} failed ({proc.returncode}): {proc.stderr[-800:]}")
    return elapsed, [float(x) for x in proc.stdout.split()]


def count(folder: Path) -> int:
    return sum(len(names) for _, _, names in os.walk(folder))


def main() -> int:
    args = begin(repeat=7)
    name = f"decorate + export, {FILES} files"
    ours, raw = [], []
    notes: dict[str, list[float]] = {"CPU s, distcomp": [], "CPU s, plain copy": [],
                                     "import + decoration alone": [], "export alone": [],
                                     "the whole distcomp process (wall)": [], 'python -c "import distcomp" (wall)': [],
                                     "python -c pass (wall)": [],
                                     "decorate + export, nothing kept (DISTCOMP_YAML_CACHE=off: a new or changed "
                                     "function's first export)": []}
    with tempfile.TemporaryDirectory(prefix="distcomp-fn-bench-") as tmp:
        work = Path(tmp)
        project = work / "project"
        expected = make_project(project)
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPYCACHEPREFIX"] = str(work / "pycache")
        env["XDG_CACHE_HOME"] = str(work / "cache")  # distcomp's own caches (entry points, records' methods), fresh
        print(f"rounds: {args.repeat} (+1 warm-up), cores: {os.cpu_count()}, project: {expected} files shipped "
              f"of {count(project)}, {sum(p.stat().st_size for p in project.rglob('*') if p.is_file()) >> 10} KiB",
              flush=True)
        try:
            for i in range(args.repeat + 1):
                out_ours, out_raw = work / f"export{i}", work / f"copy{i}"
                sides = [("ours", [sys.executable, "-c", OURS, str(project), str(out_ours)]),
                         ("raw", [sys.executable, "-c", RAW, str(project), str(out_raw), *IGNORE])]
                for side, argv in sides if i % 2 == 0 else sides[::-1]:  # alternate who goes first
                    took, printed = timed(argv, env)
                    if side == "raw" and i:
                        raw.append(printed[0])
                        notes["CPU s, plain copy"].append(printed[1])
                    elif side == "ours" and i:
                        ours.append(printed[0] + printed[1])
                        notes["CPU s, distcomp"].append(printed[2])
                        notes["import + decoration alone"].append(printed[0])
                        notes["export alone"].append(printed[1])
                        notes["the whole distcomp process (wall)"].append(took)
                if i:
                    cold = work / f"cold{i}"
                    _, printed = timed([sys.executable, "-c", OURS, str(project), str(cold)],
                                       {**env, "DISTCOMP_YAML_CACHE": "off"})
                    notes["decorate + export, nothing kept (DISTCOMP_YAML_CACHE=off: a new or changed "
                          "function's first export)"].append(printed[0] + printed[1])
                    shutil.rmtree(cold)
                    notes['python -c "import distcomp" (wall)'].append(
                        wall([sys.executable, "-c", "import distcomp"], env))
                    notes["python -c pass (wall)"].append(wall([sys.executable, "-c", "pass"], env))
                shipped, copied = count(out_ours / "code"), count(out_raw)
                if shipped != expected or copied != expected or not (out_ours / "component.yaml").is_file():
                    raise RuntimeError(f"export shipped {shipped} files, the plain copy {copied}; expected {expected}")
                shutil.rmtree(out_ours)
                shutil.rmtree(out_raw)
            rows = [Row(name, "plain copy (shutil)", ours, raw, seconds_at_most(0.1), notes=notes)]
        except RuntimeError as exc:
            rows = [Row(name, "plain copy (shutil)", ours, raw, seconds_at_most(0.1), error=str(exc))]
    return args.finish(rows)


if __name__ == "__main__":
    sys.exit(main())
