"""Two holes in where a function component comes from.

- A file that rebinds what the static reading of ``FILE.py:FUNCTION`` takes as given
  (``distcomp.component = functools.partial(...)``, ``setattr(distcomp, ...)``, ``sys.modules``,
  ``globals()``...) is imported instead: the component is the one its import makes.
- A script Python read from standard input (``python - < nb.py``) has ``<stdin>`` for a file
  name: its function is refused at decoration, saying to run the file itself, instead of a job
  whose ranks look for a module named ``<stdin>``."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from distcomp.function._static import read

from ..targets._jobs import clean_env

# each once read as the plain decorator's component, though its import makes another one
REBINDS = {
    "a wrapped decorator": "import functools\nimport distcomp\n"
                           "distcomp.component = functools.partial(distcomp.component, nproc_per_node=4)\n",
    "through an alias": "import functools\nimport distcomp as d\n"
                        "d.component = functools.partial(d.component, nproc_per_node=4)\nimport distcomp\n",
    "before a from-import": "import functools, distcomp\n"
                            "distcomp.component = functools.partial(distcomp.component, nproc_per_node=4)\n"
                            "from distcomp import component\ndistcomp.component = component\n",
    "in a function called at the top": "import distcomp\ndef wrap(make):\n    import distcomp as dc\n"
                                       "    dc.component = make\nwrap(lambda fn: fn)\n",
    "setattr": "import distcomp\nsetattr(distcomp, 'component', lambda fn: fn)\n",
    "a computed setattr": "import distcomp\nNAME = 'compo' + 'nent'\nsetattr(distcomp, NAME, lambda fn: fn)\n",
    "the module's __dict__": "import distcomp\ndistcomp.__dict__['component'] = lambda fn: fn\n",
    "its __dict__ updated": "import distcomp\nvars(distcomp).update(component=lambda fn: fn)\n",
    "sys.modules": "import sys, types\nsys.modules['distcomp'] = types.SimpleNamespace(component=lambda fn: fn)\n"
                   "import distcomp\n",
    "globals()": "import distcomp\nglobals()['distcomp'] = None\n",
    "exec": "import distcomp\nexec('distcomp = None')\n",
    "a port swapped": "import distcomp\ndistcomp.Input = distcomp.Output\n",
    "typing changed": "import typing\nimport distcomp\ntyping.Optional = typing.List\n",
    "a builtin changed": "import builtins\nimport distcomp\nbuiltins.int = str\n",
    "deleted": "import distcomp\ndel distcomp.component\n",
}
FUNCTION = "\n@distcomp.component\ndef train(x: int = 1, data: distcomp.Input = None):\n    pass\n"

# each still read without importing it: nothing it does can change distcomp, typing or a builtin
SURE = {
    "os.environ set": "import os\nos.environ['OMP_NUM_THREADS'] = '1'\n",
    "sys.path grown": "import sys\nsys.path.insert(0, '.')\nif 'torch' in sys.modules:\n    pass\n",
    "an attribute of its own": "class Model:\n    def __init__(self):\n        self.component = 1\n"
                               "        setattr(self, 'lr', 0.1)\n",
    "vars() read": "import argparse\nARGS = vars(argparse.Namespace(a=1))\n",
    "a dict of its own": "CONFIG = {}\nCONFIG['lr'] = 0.1\nCONFIG.update(epochs=3)\n",
}


def _file(tmp_path: Path, text: str, name: str = "rebind_mod") -> Path:
    (tmp_path / "proj").mkdir(exist_ok=True)
    file = tmp_path / "proj" / f"{name}.py"
    file.write_text(text, encoding="utf-8")
    return file


@pytest.mark.parametrize("case", sorted(REBINDS))
def test_a_file_that_rebinds_what_the_reading_relies_on_is_imported(case: str, tmp_path: Path) -> None:
    file = _file(tmp_path, REBINDS[case] + FUNCTION)
    assert read(file, "train") is None


@pytest.mark.parametrize("case", sorted(SURE))
def test_a_file_that_changes_only_its_own_things_is_still_read(case: str, tmp_path: Path) -> None:
    file = _file(tmp_path, "import distcomp\n" + SURE[case] + FUNCTION)
    found = read(file, "train")
    assert found is not None and [p.name for p in found.params] == ["x", "data"]


def test_the_cli_gives_the_component_the_import_makes(tmp_path: Path) -> None:
    """``distcomp validate FILE.py:train`` says what the file's own decorator made: 4 processes."""
    _file(tmp_path, REBINDS["a wrapped decorator"] + FUNCTION, "wrapped")
    proc = subprocess.run([sys.executable, "-m", "distcomp", "validate", "wrapped.py:train"], cwd=tmp_path / "proj",
                          capture_output=True, text=True, env=clean_env(), timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "wrapped.py:train: ok: train (torch.distributed, 1 node x 4 processes)\n"


# -- a script read from standard input -----------------------------------------------------

SCRIPT = textwrap.dedent("""
    import distcomp

    @distcomp.component{args}
    def train(x: int = 1):
        print(x)

    print("decorated", train.origin.module)
    distcomp.run(train, tracking=False)
""")
STDIN = ("@distcomp.component __main__.train is defined in a script Python read from <stdin> (python - < FILE), not "
         "from a file: ranks import a function from its module's file; run the script as a file (python FILE), or "
         "import the function from a .py file")


def _python(tmp_path: Path, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], input=stdin, cwd=tmp_path, capture_output=True, text=True,
                          env=clean_env(), timeout=120)


@pytest.mark.parametrize("args", ["", "(code='.')"], ids=["bare", "code"])
def test_a_function_read_from_stdin_is_refused_at_decoration(tmp_path: Path, args: str) -> None:
    proc = _python(tmp_path, "-", stdin=SCRIPT.format(args=args))
    assert proc.returncode == 1 and "decorated" not in proc.stdout, proc.stdout + proc.stderr
    assert proc.stderr.splitlines()[-1] == f"distcomp.function._signature.FunctionError: {STDIN}"
    assert list(tmp_path.iterdir()) == []  # no run folder, nothing made


@pytest.mark.slow
def test_a_function_imported_by_a_script_on_stdin_still_runs(tmp_path: Path) -> None:
    """What the refusal says to do works: the script on stdin imports the function from its file."""
    (tmp_path / "steps.py").write_text(SCRIPT.format(args="").split("\nprint(", 1)[0] + "\n", encoding="utf-8")
    proc = _python(tmp_path, "-", stdin="import distcomp\nfrom steps import train\n"
                                        "print(distcomp.run(train, tracking=False, inputs={'x': 7}).state.value)\n")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1] == "succeeded"


def test_a_function_given_by_python_c_says_so(tmp_path: Path) -> None:
    proc = _python(tmp_path, "-c", SCRIPT.format(args="(code='.')"))
    assert proc.returncode == 1
    assert "its source cannot be read (a function typed at a plain Python prompt, or given by python -c)" in \
        proc.stderr.splitlines()[-1]
