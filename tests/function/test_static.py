"""``FILE.py:FUNCTION`` read from the file without importing it (``distcomp.function._static``):
the same component an import gives, for every form a signature may take; the module's top
level (``import torch``...) never runs in the process that starts the job; and anything the
reading cannot be sure of is imported as before."""

from __future__ import annotations

import inspect
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from distcomp.errors import UsageError
from distcomp.function import FunctionError
from distcomp.function._component import DEFAULTS, component
from distcomp.function._reference import load_reference
from distcomp.function._static import read

from ..targets._jobs import clean_env

REPO = Path(__file__).resolve().parents[2]

# each a module whose ``train`` every reading must agree on; together they use each form the
# static reading takes (aliases, typing spellings, string annotations, keyword-only parameters...)
SOURCES = {
    "plain": '''
        import distcomp

        @distcomp.component
        def train(data: distcomp.Input, model: distcomp.Output, epochs: int = 3, lr: float = 0.01, amp: bool = False,
                  note: str = "it's $(x)"):
            """Trains.

            More text."""
    ''',
    "aliases": '''
        import typing as t
        import distcomp as dc
        import distcomp.runtime

        @dc.component(name="aliased", version="2.0", launcher="mpi", nodes=2, nproc_per_node=3, image="img:1",
                      packages=["numpy==2.0"], env={"A": "b", "N": 3}, description="said here")
        def train(mode: t.Literal["a", "b"] = "b", seed: t.Optional[int] = None, data: t.Union[dc.Input, None] = None,
                  *, depth: int = -2, ratio: float = 1):
            pass
    ''',
    "from-imports": '''
        from __future__ import annotations

        from typing import Literal, Optional
        from distcomp import Input, Output, component as comp

        @comp(nproc_per_node=2, code=".")
        def train(data: Input, out: Output, level: Literal[1, 2, True] = 2, tag: str | None = None,
                  extra: Optional[Input] = None, quoted: "int" = 4, flag: bool = None):
            """  One line, padded.  """
    ''',
}

# each read as unsure (None): the import decides
UNSURE = {
    "a computed argument": "import distcomp\nN = 2\n@distcomp.component(nproc_per_node=N)\ndef train(): pass\n",
    "two decorators": "import distcomp, functools\n@distcomp.component\n@functools.cache\ndef train(): pass\n",
    "distcomp rebound": "import distcomp\ndistcomp = None\n@distcomp.component\ndef train(): pass\n",
    "the function rebound": "import distcomp\n@distcomp.component\ndef train(): pass\ntrain = 1\n",
    "a star import": "from distcomp import *\n@component\ndef train(): pass\n",
    "an int of its own": "import distcomp\nint = str\n@distcomp.component\ndef train(x: int = 1): pass\n",
    "global in a function": "import distcomp\ndef f():\n    global distcomp\n@distcomp.component\ndef train(): pass\n",
    "a computed default": "import distcomp\n@distcomp.component\ndef train(x: int = 2 ** 3): pass\n",
    "another annotation": "import distcomp\n@distcomp.component\ndef train(x: list = None): pass\n",
    "an unknown keyword": "import distcomp\n@distcomp.component(nprocs=2)\ndef train(): pass\n",
    "*args": "import distcomp\n@distcomp.component\ndef train(*a: int): pass\n",
    "not decorated": "def train(): pass\n",
    "a syntax error": "def train(:\n",
}


def _write(folder: Path, name: str, source: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    file = folder / f"{name.replace('-', '_')}.py"
    file.write_text(textwrap.dedent(source).lstrip(), encoding="utf-8")
    return file


def _imported_text(file: Path, cwd: Path) -> str:
    """The spec text an import of ``file`` gives, in a fresh process (as distcomp did before)."""
    code = ("import sys\nfrom pathlib import Path\nfrom distcomp.function._reference import load_imported\n"
            f"c = load_imported(Path({str(file)!r}), 'train')\nsys.stdout.write(c.spec_text(str(c.code)))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=cwd, env=clean_env(),
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_the_reading_gives_what_the_import_gives(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    file = _write(tmp_path / "proj", name, SOURCES[name])
    monkeypatch.chdir(tmp_path / "proj")
    found = read(file, "train")
    assert found is not None, "read as unsure: the import decided"
    assert found.spec_text(str(found.code)) == _imported_text(file, tmp_path / "proj")
    assert found.__name__ == "train" and found.__module__ == file.stem


@pytest.mark.slow
@pytest.mark.parametrize("ref", ["examples/torch-function/train.py:train", "examples/tensorflow-function/train.py:train",
                                 "examples/mpi-function/train.py:train", "benchmarks/jobs/fn_start/start_fn.py:start",
                                 "benchmarks/jobs/torch_allreduce/allreduce_top.py:allreduce"])
def test_every_function_component_of_the_repository_reads_as_it_imports(ref: str) -> None:
    file, _, name = ref.partition(":")
    found = read(REPO / file, name)
    assert found is not None
    code = ("import sys\nfrom pathlib import Path\nfrom distcomp.function._reference import load_imported\n"
            f"c = load_imported(Path({str(REPO / file)!r}), {name!r})\nsys.stdout.write(c.spec_text(str(c.code)))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=clean_env(), timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert found.spec_text(str(found.code)) == proc.stdout


@pytest.mark.parametrize("case", sorted(UNSURE))
def test_what_it_cannot_be_sure_of_is_left_to_the_import(case: str, tmp_path: Path) -> None:
    file = tmp_path / "unsure_mod.py"
    file.write_text(UNSURE[case], encoding="utf-8")
    assert read(file, "train") is None


def test_an_unsure_file_is_imported_and_still_works(tmp_path: Path) -> None:
    _write(tmp_path, "computed", "import distcomp\nN = 3\n@distcomp.component(nproc_per_node=N)\n"
                                 "def train(x: int = 1):\n    return x * 2\n")
    found = load_reference(f"{tmp_path}/computed.py:train")
    assert found.settings.nproc_per_node == 3 and found(x=4) == 8
    _write(tmp_path, "badtype", "import distcomp\n@distcomp.component\ndef train(x: list = None): pass\n")
    with pytest.raises(FunctionError, match="parameter 'x': annotation list is not a component type"):
        load_reference(f"{tmp_path}/badtype.py:train")


def test_final_mistakes_are_the_decorators_own_errors(tmp_path: Path) -> None:
    _write(tmp_path, "badname", "import distcomp\n@distcomp.component(name='-x')\ndef train(): pass\n")
    with pytest.raises(FunctionError, match=r"badname.py:train: name '-x'"):
        read(tmp_path / "badname.py", "train")
    _write(tmp_path, "baddefault", "import distcomp\n@distcomp.component\ndef train(x: int = 'a'): pass\n")
    with pytest.raises(FunctionError, match="the default 'a' is not a int"):
        read(tmp_path / "baddefault.py", "train")


def test_calling_a_read_component_imports_its_module_then(tmp_path: Path) -> None:
    _write(tmp_path, "lazy_mod", "import distcomp\n@distcomp.component\ndef train(x: int = 1):\n"
                                 "    '''Doubles.'''\n    return x * 2\n")
    found = load_reference(f"{tmp_path}/lazy_mod.py:train")
    assert "lazy_mod" not in sys.modules and found.__doc__ == "Doubles."
    try:
        assert found(x=21) == 42 and "lazy_mod" in sys.modules
        assert found.__wrapped__ is found.fn
    finally:
        sys.modules.pop("lazy_mod", None)
        sys.path.remove(str(tmp_path))
    with pytest.raises(AttributeError):
        found.no_such_attribute  # noqa: B018


def test_the_defaults_are_the_decorators(tmp_path: Path) -> None:
    keywords = {n: p.default for n, p in inspect.signature(component).parameters.items() if p.kind == p.KEYWORD_ONLY}
    assert keywords == dict(DEFAULTS)


@pytest.mark.slow
def test_the_top_level_of_the_module_never_runs_where_the_job_starts(tmp_path: Path) -> None:
    """A module whose top level imports a package not installed here (as a cluster image has
    it) and writes a file: validate and compile neither fail nor write it; the ranks import it."""
    proj = tmp_path / "proj"
    marker = tmp_path / "top-level-ran"
    _write(proj, "train", f'''
        import pathlib
        import distcomp
        pathlib.Path({str(marker)!r}).write_text("ran")
        import a_package_only_the_cluster_has  # noqa: F401

        @distcomp.component(name="top", nproc_per_node=2, image="trainer:1")
        def train(epochs: int = 1):
            pass
    ''')
    env = {**clean_env(), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    for argv in (["validate", f"{proj}/train.py:train"],
                 ["compile", f"{proj}/train.py:train", "--target", "kubeflow", "--out", str(tmp_path / "job.yaml")]):
        proc = subprocess.run([sys.executable, "-m", "distcomp", *argv], capture_output=True, text=True, env=env,
                              cwd=tmp_path, timeout=120)
        assert proc.returncode == 0, proc.stderr
        assert not marker.exists(), f"distcomp {argv[0]} ran the module's top level"
    assert "- distcomp.function.run\n" in (tmp_path / "job.yaml").read_text()
    # the ranks import it: the missing package is the job's root cause, named, in one run
    proc = subprocess.run([sys.executable, "-m", "distcomp", "run", f"{proj}/train.py:train", "--run-dir",
                           str(tmp_path / "run")], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=180)
    assert proc.returncode != 0
    assert "No module named 'a_package_only_the_cluster_has'" in proc.stderr
    assert marker.read_text() == "ran"


def test_a_reference_to_a_missing_function_still_says_what_the_file_has(tmp_path: Path) -> None:
    _write(tmp_path, "has_one", "import distcomp\n@distcomp.component\ndef train(): pass\n")
    with pytest.raises(UsageError, match=r"has no 'other' \(its components: train\)"):
        load_reference(f"{tmp_path}/has_one.py:other")
    sys.modules.pop("has_one", None)
    sys.path.remove(str(tmp_path))


def test_a_module_inside_a_package_reads_as_it_imports(tmp_path: Path) -> None:
    pkg = tmp_path / "proj" / "pkg"
    (pkg / "sub").mkdir(parents=True)
    for folder in (pkg, pkg / "sub"):
        (folder / "__init__.py").write_text("", encoding="utf-8")
    (pkg / "sub" / "helpers.py").write_text("def f():\n    return 1\n", encoding="utf-8")
    file = _write(pkg / "sub", "train", '''
        from .helpers import f  # a relative import: the module runs only as pkg.sub.train
        import distcomp

        @distcomp.component(nproc_per_node=2)
        def train(epochs: int = 1):
            f()
    ''')
    found = read(file, "train")
    assert found is not None and found.origin.module == "pkg.sub.train" and found.code == tmp_path / "proj"
    assert found.spec_text(str(found.code)) == _imported_text(file, tmp_path)
