"""A component's command is the author's shell line, run by a shell on every rank, as Azure ML
runs it: `cd`, `&&` and each rank's own variables work under every local launcher, and an
input value holding shell syntax is one argument that runs nothing."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.targets._jobs import clean_env

JOB = Path(__file__).resolve().parent / "jobs" / "shellline"
VALUE = "a b; touch pwned"


def run(kind: str, tmp_path: Path) -> list[dict[str, object]]:
    proc = subprocess.run([sys.executable, "-m", "distcomp", "run", str(JOB / f"{kind}.yaml"), "--no-tracking",
                           "--run-dir", str(tmp_path / "run"), "--output", f"out={tmp_path / 'out'}"],
                          capture_output=True, text=True, timeout=180, env=clean_env(), cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert not list(JOB.rglob("pwned")) and not list(tmp_path.rglob("pwned"))  # the value ran nothing
    return [json.loads(p.read_text()) for p in sorted((tmp_path / "out").glob("*.json"))]


def check(records: list[dict[str, object]], tmp_path: Path) -> list[str]:
    """Every rank ran in sub/ (the `cd`) with the value whole; what each saw of its variable."""
    assert len(records) == 2, records
    seen = []
    for rec in records:
        argv = rec["argv"]
        assert isinstance(argv, list) and rec["cwd"] == str(JOB / "sub")
        assert argv[argv.index("--value") + 1] == VALUE and argv[argv.index("--out") + 1] == str(tmp_path / "out")
        seen.append(argv[argv.index("--seen") + 1])
    return sorted(seen)


def test_torch_ranks_read_their_own_rank(tmp_path: Path) -> None:
    assert check(run("torch", tmp_path), tmp_path) == ["0", "1"]


@pytest.mark.slow
def test_mpi_ranks_read_their_own_rank_through_mpirun(tmp_path: Path) -> None:
    assert check(run("mpi", tmp_path), tmp_path) == ["0", "1"]


@pytest.mark.slow
def test_tensorflow_workers_read_their_own_tf_config(tmp_path: Path) -> None:
    configs = [json.loads(s) for s in check(run("tensorflow", tmp_path), tmp_path)]
    assert sorted(c["task"]["index"] for c in configs) == [0, 1]
    assert all(c["task"]["type"] == "worker" and len(c["cluster"]["worker"]) == 2 for c in configs)


def test_render_shows_the_line_each_rank_runs(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "distcomp", "render", str(JOB / "torch.yaml"), "-o", "out=/o"],
                          capture_output=True, text=True, timeout=60, env=clean_env())
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ("cd sub && echo starting >/dev/null && python record.py --seen \"$RANK\" "
                           "--value 'a b; touch pwned' --out /o\n")
    validate = subprocess.run([sys.executable, "-m", "distcomp", "validate", str(JOB / "torch.yaml")],
                              capture_output=True, text=True, timeout=60, env=clean_env())
    assert validate.returncode == 0 and "warning" not in validate.stdout + validate.stderr  # no `&&` warning


HOSTILE = "$(touch pwned) `touch pwned` it's \"two words\" $HOME \\"


def test_a_value_is_exact_inside_substitutions_and_defaults_on_every_rank(tmp_path: Path) -> None:
    """`"${X:-${{inputs.v}}}"`, `"$(printf %s ${{inputs.v}})"` and backticks: each rank's program gets
    the value as given, and the `$(touch ...)` in it ran nowhere (issue 22)."""
    proc = subprocess.run([sys.executable, "-m", "distcomp", "run", str(JOB / "contexts.yaml"), "--no-tracking",
                           "--run-dir", str(tmp_path / "run"), "--output", f"out={tmp_path / 'out'}",
                           "--input", f"value={HOSTILE}"],
                          capture_output=True, text=True, timeout=180, env=clean_env(), cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert not list(JOB.rglob("pwned")) and not list(tmp_path.rglob("pwned"))
    records = [json.loads(p.read_text()) for p in sorted((tmp_path / "out").glob("*.json"))]
    assert len(records) == 2
    for rec in records:
        argv = rec["argv"]
        for flag in ("--default", "--sub", "--tick", "--plain"):
            assert argv[argv.index(flag) + 1] == HOSTILE, (flag, argv)
    assert sorted(rec["argv"][rec["argv"].index("--seen") + 1] for rec in records) == ["0", "1"]


def test_render_shows_where_a_value_goes_in_as_a_variable() -> None:
    """`distcomp render`: the value quoted once at the line's start, read where the shell would parse it again."""
    proc = subprocess.run([sys.executable, "-m", "distcomp", "render", str(JOB / "contexts.yaml"), "-o", "out=/o",
                           "-i", "value=it's"], capture_output=True, text=True, timeout=60, env=clean_env())
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ("dc_in_value='it'\"'\"'s' dc_out_out=/o; cd sub && python record.py --seen \"$RANK\" "
                           "--default \"${UNSET_X:-${dc_in_value}}\" --sub \"$(printf '%s' \"${dc_in_value}\")\" "
                           "--tick \"`printf '%s' \"${dc_in_value}\"`\" --plain \"${dc_in_value}\" --out \"${dc_out_out}\"\n")
