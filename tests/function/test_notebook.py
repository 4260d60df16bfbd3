"""A function typed in a notebook cell, with ``code=``: real IPython runs the cells (its
``__main__`` has no file, as in Jupyter), the function's source travels inline in the runner's
command, and 2 real ranks call it with typed values and import what ``code=`` holds."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from .conftest import _env, explain, ranks


SHELL = '''
import json, sys
from IPython.core.interactiveshell import InteractiveShell

shell = InteractiveShell.instance()
shell.user_ns.update(json.loads(sys.argv[1]))
for cell in json.loads(sys.argv[2]):
    result = shell.run_cell(cell)
    if not result.success:
        sys.exit(3)
'''

CELL = '''
@distcomp.component(name="nb-train", nproc_per_node=2, code=PROJ)
def train(out: distcomp.Output, epochs: int = 2, note: str = "plain", fail: bool = False):
    """Typed in a cell."""
    import json, os
    from distcomp import runtime
    from helpers import scale  # from the code folder
    info = runtime.rank_info()
    with open(os.path.join(out, f"rank{info.rank}.json"), "w") as f:
        json.dump({"epochs": [epochs, type(epochs).__name__], "note": note, "scaled": scale(1.0, 1),
                   "world": info.world_size}, f)
    if fail and info.rank == 1:
        raise RuntimeError("rank 1 fails in the notebook's function")
'''


def notebook(tmp_path: Path, *cells: str, **names: str) -> subprocess.CompletedProcess[str]:
    """Each cell run by a real IPython shell, in a fresh process; ``names`` in its namespace."""
    return subprocess.run([sys.executable, "-c", SHELL, json.dumps(names), json.dumps([textwrap.dedent(c) for c in cells])],
                          cwd=tmp_path, capture_output=True, text=True, env=_env(tmp_path, None), timeout=240)


@pytest.fixture
def proj(tmp_path: Path) -> Path:
    folder = tmp_path / "proj"
    folder.mkdir()
    (folder / "helpers.py").write_text("def scale(a, b):\n    return a / (b + 1)\n", encoding="utf-8")
    return folder


@pytest.mark.slow
def test_a_cells_function_runs_on_two_ranks_with_typed_values(proj: Path, tmp_path: Path) -> None:
    out, run = tmp_path / "out", tmp_path / "run"
    proc = notebook(tmp_path, "import distcomp", CELL,
                    "o = distcomp.run(train, inputs={'epochs': 3, 'note': \"a b $(x)\"}, outputs={'out': OUT}, "
                    "run_dir=RUN)\nprint('state', o.state.value)",
                    PROJ=str(proj), OUT=str(out), RUN=str(run))
    assert proc.returncode == 0, explain(proc)
    assert "state succeeded" in proc.stdout
    got = ranks(out)
    for r in (0, 1):
        assert got[r] == {"epochs": [3, "int"], "note": "a b $(x)", "scaled": 0.5, "world": 2}
    assert "--inline " in (run / "logs" / "rank0.log").read_text(encoding="utf-8")


@pytest.mark.slow
def test_a_raising_cell_function_shows_its_own_lines_as_the_root_cause(proj: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    proc = notebook(tmp_path, "import distcomp", CELL,
                    "o = distcomp.run(train, inputs={'fail': True}, outputs={'out': OUT}, run_dir=RUN)\n"
                    "print('state', o.state.value)",
                    PROJ=str(proj), OUT=str(tmp_path / "out"), RUN=str(run))
    assert proc.returncode == 0, explain(proc)
    assert "state failed" in proc.stdout
    log = (run / "logs" / "rank1.log").read_text(encoding="utf-8")
    assert 'File "<train from the notebook>"' in log and 'raise RuntimeError("rank 1 fails' in log


@pytest.mark.slow
def test_its_export_runs_with_no_notebook(proj: Path, tmp_path: Path) -> None:
    proc = notebook(tmp_path, "import distcomp", CELL, "distcomp.export(train, EXPORT)",
                    PROJ=str(proj), EXPORT=str(tmp_path / "exported"))
    assert proc.returncode == 0, explain(proc)
    assert (tmp_path / "exported" / "code" / "helpers.py").is_file()
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-m", "distcomp", "run", "exported/component.yaml", "-i", "epochs=5",
                           "-o", f"out={out}", "--run-dir", str(tmp_path / "run")], cwd=tmp_path,
                          capture_output=True, text=True, env=_env(tmp_path, None), timeout=240)
    assert done.returncode == 0, explain(done)
    assert ranks(out)[1]["epochs"] == [5, "int"]


@pytest.mark.parametrize(("cell", "message"), [
    ("@distcomp.component\ndef f(x: int = 1):\n    pass\n",
     "with no file behind it (a notebook or a REPL)"),
    ("import json\n@distcomp.component(code=PROJ)\ndef f(x: int = 1):\n    return json.dumps(x)\n",
     "f uses json from the notebook; ranks run the function's source alone"),
    ("N = 3\n@distcomp.component(code=PROJ)\ndef f(x: int = N):\n    pass\n",
     "the default N is not a literal"),
])
def test_what_cannot_travel_is_refused_at_decoration(cell: str, message: str, proj: Path, tmp_path: Path) -> None:
    proc = notebook(tmp_path, "import distcomp", cell, PROJ=str(proj))
    assert proc.returncode == 3
    assert "FunctionError" in proc.stdout + proc.stderr and message in proc.stdout + proc.stderr
