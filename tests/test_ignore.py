"""What ``.gitignore`` and ``.distcompignore`` leave out of the code that travels (git's rules),
checked on the one listing every shipper uses (``distcomp.delivery.code.folder_files``)."""

from __future__ import annotations

from pathlib import Path

from distcomp.delivery.code import folder_files


def _tree(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def test_gitignore_rules(tmp_path: Path) -> None:
    code = tmp_path / "code"
    _tree(code, {
        ".gitignore": "# a comment\n*.ckpt\n!keep.ckpt\n/top-only.txt\nbuild/\ndata/**/*.bin\nsub/deep/\nlog?.txt\n"
                      "[ab].tmp\n",
        "train.py": "", "a.ckpt": "", "keep.ckpt": "", "nested/b.ckpt": "", "top-only.txt": "",
        "nested/top-only.txt": "", "build/out.py": "", "nested/build/x.py": "", "build.py": "",
        "data/x/y/z.bin": "", "data/z.bin": "", "data/z.csv": "", "sub/deep/f.py": "", "log1.txt": "",
        "log12.txt": "", "a.tmp": "", "c.tmp": "",
        "pkg/.gitignore": "local.py\n", "pkg/local.py": "", "pkg/mod.py": "", "other/local.py": "",
    })
    files = sorted(folder_files(code))
    assert files == [".gitignore", "build.py", "c.tmp", "data/z.csv", "keep.ckpt", "log12.txt",
                     "nested/top-only.txt", "other/local.py", "pkg/.gitignore", "pkg/mod.py", "train.py"]


def test_distcompignore_comes_after_gitignore_and_a_folder_left_out_stays_out(tmp_path: Path) -> None:
    code = tmp_path / "code"
    _tree(code, {".gitignore": "*.csv\nlarge/\n", ".distcompignore": "!small.csv\nsecrets.txt\n!large/keep.txt\n",
                 "small.csv": "", "big.csv": "", "secrets.txt": "", "large/keep.txt": "", "x.py": ""})
    assert sorted(folder_files(code)) == [".distcompignore", ".gitignore", "small.csv", "x.py"]


def test_the_repository_gitignore_above_the_code_folder_counts(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    _tree(repo, {".git/HEAD": "", ".gitignore": "*.log\n/src/generated/\n", "src/a.py": "", "src/run.log": "",
                 "src/generated/g.py": ""})
    assert sorted(folder_files(repo / "src")) == ["a.py"]
    # outside any repository, a .gitignore above the code folder is not the project's
    _tree(tmp_path / "loose", {".gitignore": "*.py\n", "src/a.py": ""})
    assert sorted(folder_files(tmp_path / "loose" / "src")) == ["a.py"]


def test_a_copy_keeps_what_the_listing_keeps(tmp_path: Path) -> None:
    """``copy_filter`` (a job folder's copy, as the slurm target makes it) leaves out what
    ``folder_files`` does, nested ignore files, negations and folders included."""
    import shutil

    from distcomp.base.ignore import copy_filter

    code = tmp_path / "code"
    _tree(code, {".gitignore": "*.csv\nlarge/\n", ".distcompignore": "!small.csv\nnotes.txt\n", "small.csv": "",
                 "big.csv": "", "notes.txt": "", "large/keep.txt": "", "x.py": "", "pkg/.gitignore": "local.py\n",
                 "pkg/local.py": "", "pkg/mod.py": "", "other/local.py": "", "skipme/y.py": ""})
    shutil.copytree(code, tmp_path / "copy", ignore=copy_filter(code, {"skipme"}))
    copied = sorted(p.relative_to(tmp_path / "copy").as_posix() for p in (tmp_path / "copy").rglob("*") if p.is_file())
    assert copied == sorted(f for f in folder_files(code) if not f.startswith("skipme/")) == [
        ".distcompignore", ".gitignore", "other/local.py", "pkg/.gitignore", "pkg/mod.py", "small.csv", "x.py"]


def test_a_spec_with_no_file_ships_its_code_folder_by_the_same_rules(tmp_path: Path) -> None:
    """A function component's spec has no file (``source`` None): its code folder's files are
    what travels, by the same rules, with no spec file among them."""
    from distcomp.delivery.code import code_files
    from distcomp.spec import loads

    code = tmp_path / "proj"
    _tree(code, {"train.py": "", "helpers.py": "", ".gitignore": "*.ckpt\n", "m.ckpt": "", ".distcompignore": "n\n",
                 "n": ""})
    spec = loads("name: x\ntype: DistributedComponent\nlauncher: {type: mpi, additional_arguments: python train.py}\n",
                 "<memory>", code)
    assert spec.source is None and spec.code == code
    assert sorted(code_files(spec)) == [".distcompignore", ".gitignore", "helpers.py", "train.py"]


def test_the_rules_as_one_list_of_patterns_match_as_the_listing(tmp_path: Path) -> None:
    """``patterns``: every .distcompignore under the folder as one list relative to it, for a
    shipper that matches paths itself (Ray's ``excludes``, matched by pathspec's gitwildmatch):
    anchored and unanchored lines, folders only, negations, nested files."""
    import pathspec

    from distcomp.base.ignore import patterns

    code = tmp_path / "code"
    files = {".distcompignore": "# c\nnotes.txt\n/top.txt\nscratch/\n*.log\n!keep.log\n", "notes.txt": "",
             "a/notes.txt": "", "top.txt": "", "a/top.txt": "", "scratch/x.py": "", "a/scratch/y.py": "",
             "run.log": "", "keep.log": "", "x.py": "",
             "pkg/.distcompignore": "local.py\n/only.py\ndeep/*.bin\n", "pkg/local.py": "", "pkg/sub/local.py": "",
             "pkg/only.py": "", "pkg/sub/only.py": "", "pkg/deep/d.bin": "", "pkg/mod.py": "", "other/local.py": "",
             "other/only.py": "", "deep/d.bin": "", ".venv/.distcompignore": "x.py\n"}
    _tree(code, files)
    found = patterns(code, skip={".venv"})
    assert found == ["notes.txt", "/top.txt", "scratch/", "*.log", "!keep.log", "pkg/**/local.py", "pkg/only.py",
                     "pkg/deep/*.bin"]
    spec = pathspec.PathSpec.from_lines("gitwildmatch", found)
    kept = sorted(f for f in files if not f.startswith(".venv/") and not spec.match_file(f))
    assert kept == sorted(folder_files(code))
