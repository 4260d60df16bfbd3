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
