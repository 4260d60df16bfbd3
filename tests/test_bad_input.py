"""Bad input through the real `distcomp` command: exit 2, the exact message, no traceback, and
nothing created: no run folder, no output, no MLflow store or run."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from distcomp.core.jobs import make_job
from distcomp.spec import InputError, loads

BIG = 140_000  # over MAX_ARG_STRLEN (131072 bytes, its NUL included)
LIMIT = "over Linux's limit of 131071 bytes for one argument or environment string (MAX_ARG_STRLEN, 128 KiB)"
NUL = "holds a NUL byte (\\0), which no program argument or environment variable can carry; remove it"
OUT_SPEC = """\
name: out
type: DistributedComponent
inputs:
  msg: {type: String, default: hi}
outputs:
  model: {type: AnyDirectory}
  report: {type: AnyFile}
launcher:
  type: torch.distributed
  process_count_per_node: 1
  additional_arguments: python -c pass {inputs.msg} {outputs.model} {outputs.report}
"""


def distcomp(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """The CLI as a user runs it, tracking into an SQLite store under ``cwd`` unless told otherwise."""
    full = {**os.environ, "MLFLOW_TRACKING_URI": f"sqlite:///{cwd / 'mlflow.db'}", **env}
    return subprocess.run([sys.executable, "-m", "distcomp", *args], capture_output=True, text=True, cwd=cwd,
                          env=full, timeout=120)


def files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def refused(proc: subprocess.CompletedProcess[str], *lines: str) -> None:
    """Exit 2 with exactly ``lines`` on stderr (continuation lines indented), nothing on stdout."""
    assert "Traceback" not in proc.stderr + proc.stdout
    assert (proc.returncode, proc.stdout) == (2, ""), proc.stderr
    assert proc.stderr.splitlines() == list(lines)


@pytest.fixture
def work(tmp_path: Path) -> Path:
    """A component folder (its code folder) and a file in it, under a folder of its own."""
    code = tmp_path / "comp"
    code.mkdir()
    (code / "component.yaml").write_text(OUT_SPEC)
    (code / "afile").write_text("x")
    return code


# -- NUL bytes ---------------------------------------------------------------------------------

NUL_SPEC = """\
name: nul
type: DistributedComponent
inputs:
  msg: {type: String, default: "a\\0b"}
launcher:
  type: torch.distributed
  additional_arguments: python -c pass {inputs.msg}
"""


def test_a_nul_default_is_refused_by_validate_render_and_run_and_leaves_no_run(tmp_path: Path) -> None:
    spec = tmp_path / "nul.yaml"
    spec.write_text(NUL_SPEC)
    diag = f"{spec}:4:32: inputs.msg.default: the value {NUL}"
    refused(distcomp("validate", str(spec), cwd=tmp_path), diag, f"{spec}: invalid (1 error)")
    refused(distcomp("render", str(spec), cwd=tmp_path), diag)
    before = files(tmp_path)
    refused(distcomp("run", str(spec), cwd=tmp_path), f"distcomp run: {diag}")
    assert files(tmp_path) == before  # no runs/, no mlflow.db (so no MLflow run), no mlruns/


def test_a_nul_byte_in_a_value_or_path_given_to_the_library_is_refused(work: Path) -> None:
    # a command line cannot carry a NUL byte; a caller of the library (a pipeline step, a notebook) can
    spec = loads(OUT_SPEC, base_dir=work)
    with pytest.raises(InputError) as info:
        make_job(spec, {"msg": "a\0b"}, {"model": str(work.parent / "m\0x")}, work.parent / "r\0n", work.parent)
    assert str(info.value).splitlines() == [
        f"input 'msg': the value {NUL}",
        f"run folder {work.parent / 'r'}\\0n holds a NUL byte (\\0); give --run-dir a new folder of its own",
        f"output 'model' (AnyDirectory) at {work.parent / 'm'}\\0x holds a NUL byte (\\0); "
        "give --output model=PATH naming a folder of its own",
    ]
    assert files(work.parent) == {"comp", "comp/component.yaml", "comp/afile"}


# -- the kernel's argument limits --------------------------------------------------------------


def test_a_default_or_variable_over_128_kib_is_refused_by_validate_and_run(tmp_path: Path) -> None:
    spec = tmp_path / "big.yaml"
    spec.write_text(f"name: big\ntype: DistributedComponent\ninputs:\n  msg: {{type: String, default: {'x' * BIG}}}\n"
                    f"environment_variables:\n  BIG: {'y' * BIG}\n"
                    "launcher:\n  type: torch.distributed\n  additional_arguments: python -c pass {inputs.msg}\n")
    hint = "pass large data in a file (a path input) instead"
    diags = [f"{spec}:4:32: inputs.msg.default: the value is {BIG} bytes, {LIMIT}; {hint}",
             f"{spec}:6:8: environment_variables.BIG: the environment variable is {BIG + 4} bytes, {LIMIT}; {hint}"]
    refused(distcomp("validate", str(spec), cwd=tmp_path), *diags, f"{spec}: invalid (2 errors)")
    before = files(tmp_path)
    refused(distcomp("run", str(spec), cwd=tmp_path), f"distcomp run: {diags[0]}", diags[1])
    assert files(tmp_path) == before


def test_a_command_too_long_for_exec_is_refused_before_anything_starts(tmp_path: Path) -> None:
    # Each value fits in distcomp's own command line; the rendered command does not.
    limit = os.sysconf("SC_ARG_MAX")
    spec = tmp_path / "rep.yaml"
    spec.write_text("name: rep\ntype: DistributedComponent\ninputs:\n  a: {type: String}\n  b: {type: String}\n"
                    "launcher:\n  type: torch.distributed\n  additional_arguments: python -c pass {inputs.a}{inputs.b} "
                    + " ".join(["{inputs.a}"] * (limit // 70_000 + 1)) + "\n")
    before = files(tmp_path)
    proc = distcomp("run", str(spec), "-i", f"a={'a' * 70_000}", "-i", f"b={'b' * 70_000}", cwd=tmp_path)
    assert proc.stderr.splitlines()[0] == (
        f"distcomp run: argument 3 of the command ('aaaaaaaaaaaaaaaaaaaa...') is 140000 bytes, {LIMIT}; "
        "pass large data in a file (a path input) instead")
    line = proc.stderr.splitlines()[1]
    assert line.startswith("  the command line and its environment come to ") and line.endswith(
        f" bytes; with the 16 KiB a launcher adds, that is over this machine's limit of {limit} bytes (ARG_MAX); "
        "pass large data in a file (a path input) instead")
    assert int(line.split()[8]) > limit - 16 * 1024
    refused(proc, *proc.stderr.splitlines())
    assert files(tmp_path) == before


# -- where outputs and the run folder go -------------------------------------------------------


def test_an_existing_file_where_a_folder_goes_and_a_folder_where_a_file_goes(work: Path) -> None:
    (work / "data").mkdir()
    before = files(work.parent)
    proc = distcomp("run", "component.yaml", "--output", "model=afile", "--output", "report=data",
                    "--run-dir", "afile/run", cwd=work)
    refused(proc,
            f"distcomp run: run folder {work}/afile/run cannot be created: {work}/afile is a file; "
            "give --run-dir a new folder of its own",
            f"  output 'model' (AnyDirectory) at {work}/afile is an existing file, not a folder; "
            "give --output model=PATH naming a folder of its own",
            f"  output 'report' (AnyFile) at {work}/data is an existing folder, not a file; "
            "give --output report=PATH naming a file of its own")
    refused(distcomp("run", "component.yaml", "--run-dir", "afile", "--no-tracking", cwd=work),
            f"distcomp run: run folder {work}/afile is an existing file, not a folder; "
            "give --run-dir a new folder of its own")
    assert files(work.parent) == before


@pytest.mark.parametrize("flags, message", [
    (["--run-dir", "/"], "run folder / is a system folder; give --run-dir a new folder of its own"),
    (["--run-dir", "/proc/distcomp"], "run folder /proc/distcomp is inside the system folder /proc; "
                                    "give --run-dir a new folder of its own"),
    (["--output", "model=/"], "output 'model' (AnyDirectory) at / is a system folder; "
                              "give --output model=PATH naming a folder of its own"),
    (["--output", "model=/etc"], "output 'model' (AnyDirectory) at /etc is a system folder; "
                                 "give --output model=PATH naming a folder of its own"),
    (["--output", "model=/etc/distcomp"], "output 'model' (AnyDirectory) at /etc/distcomp is inside the system "
                                          "folder /etc; give --output model=PATH naming a folder of its own"),
    (["--output", "model=/var"], "output 'model' (AnyDirectory) at /var is a system folder; "
                                 "give --output model=PATH naming a folder of its own"),
], ids=["run-dir-root", "run-dir-proc", "output-root", "output-etc", "output-under-etc", "output-var"])
def test_system_folders_are_refused(work: Path, flags: list[str], message: str) -> None:
    before = {p: os.path.lexists(p) for p in ("/logs", "/status.json", "/outputs", "/etc/distcomp")}
    try:
        refused(distcomp("run", "component.yaml", *flags, cwd=work), f"distcomp run: {message}")
        assert {p: os.path.lexists(p) for p in before} == before
        assert files(work) == {"component.yaml", "afile"}
    finally:  # without the fix the job writes there: take away what this test made, nothing else
        for path in (Path(p) for p, existed in before.items() if not existed and os.path.lexists(p)):
            shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink()


def test_the_home_folder_the_code_folder_and_its_ancestors_are_refused(work: Path) -> None:
    home, parent = work.parent / "home", work.parent
    home.mkdir()
    before = files(parent)
    proc = distcomp("run", "component.yaml", "--run-dir", str(home), "--output", "model=.", "--output",
                    f"report={parent}", cwd=work, HOME=str(home))
    refused(proc,
            f"distcomp run: run folder {home} is your home folder; give --run-dir a new folder of its own",
            f"  output 'model' (AnyDirectory) at {work} is the code folder; "
            "give --output model=PATH naming a folder of its own",
            f"  output 'report' (AnyFile) at {parent} holds the code folder {work}; "
            "give --output report=PATH naming a file of its own")
    for run_dir, why in ((f"{work}", "is the code folder"), (f"{work}/..", f"holds the code folder {work} ({parent})")):
        refused(distcomp("run", "component.yaml", "--run-dir", run_dir.replace(f"{work}", "."), cwd=work),
                f"distcomp run: run folder {run_dir} {why}; give --run-dir a new folder of its own")
    assert files(parent) == before


def test_a_run_folder_inside_the_code_folder_is_refused_but_under_its_runs_folder(work: Path) -> None:
    before = files(work.parent)
    refused(distcomp("run", "component.yaml", "--run-dir", "src/run1", cwd=work),
            f"distcomp run: run folder {work}/src/run1 is inside the code folder {work}, which is published and "
            "packaged with the component; give --run-dir a folder outside it, or under its runs/ folder")
    assert files(work.parent) == before
    # runs/ is where a run started in the code folder goes by default; publishing and packaging skip it
    proc = distcomp("run", "component.yaml", "--no-tracking", "--quiet", cwd=work)
    assert proc.returncode == 0, proc.stderr
    (run,) = (work / "runs").iterdir()
    assert (run / "status.json").is_file() and (run / "outputs" / "model").is_dir()


def test_a_symbolic_link_loop_as_code_folder_is_refused_by_validate_and_run(tmp_path: Path) -> None:
    (tmp_path / "loop").symlink_to("loop2")
    (tmp_path / "loop2").symlink_to("loop")
    spec = tmp_path / "component.yaml"
    spec.write_text(OUT_SPEC.replace("launcher:", "code: loop\nlauncher:"))
    diag = (f"{spec}:8:7: code: code folder 'loop' is a symbolic link loop (expected a folder path relative to the "
            "spec); point code: at a real folder")
    refused(distcomp("validate", str(spec), cwd=tmp_path), diag, f"{spec}: invalid (1 error)")
    before = files(tmp_path)
    refused(distcomp("run", str(spec), cwd=tmp_path), f"distcomp run: {diag}")
    assert files(tmp_path) == before


def test_symbolic_links_are_followed_before_judging_a_place(work: Path) -> None:
    (work.parent / "to-etc").symlink_to("/etc")
    (work.parent / "loop").symlink_to("loop")
    (work.parent / "nowhere").symlink_to(work.parent / "missing" / "x")
    before = files(work.parent)
    proc = distcomp("run", "component.yaml", "--output", f"model={work.parent}/to-etc/x", "--output",
                    f"report={work.parent}/loop/r", "--run-dir", f"{work.parent}/nowhere/run", cwd=work)
    refused(proc,
            f"distcomp run: run folder {work.parent}/nowhere/run cannot be created: {work.parent}/nowhere is a "
            "broken symbolic link; give --run-dir a new folder of its own",
            f"  output 'model' (AnyDirectory) at {work.parent}/to-etc/x is inside the system folder /etc (/etc/x); "
            "give --output model=PATH naming a folder of its own",
            f"  output 'report' (AnyFile) at {work.parent}/loop/r is a symbolic link loop; "
            "give --output report=PATH naming a file of its own")
    assert files(work.parent) == before


def test_a_name_too_long_for_the_filesystem_is_refused(work: Path) -> None:
    long = work.parent / ("n" * 300)  # NAME_MAX is 255
    (work / "component.yaml").write_text(OUT_SPEC.replace("inputs:\n", "inputs:\n  data: {type: AnyDirectory}\n"))
    before = files(work.parent)
    proc = distcomp("run", "component.yaml", "--run-dir", str(long), "--output", f"model={long}/m", "-i",
                    f"data={long}", cwd=work)
    refused(proc, f"distcomp run: input 'data': {long} is not a usable path (File name too long)",
            f"  run folder {long} is not a usable path (File name too long); give --run-dir a new folder of its own",
            f"  output 'model' (AnyDirectory) at {long}/m is not a usable path (File name too long); "
            "give --output model=PATH naming a folder of its own")
    assert files(work.parent) == before


# -- --status-file -----------------------------------------------------------------------------

STATUS_FIX = "give --status-file a file of its own outside the code folder"


@pytest.mark.parametrize("command", [["run"], ["submit", "--target", "local"]], ids=["run", "submit-local"])
def test_a_status_file_is_checked_like_an_output_before_anything_starts(work: Path, command: list[str]) -> None:
    (work / "sub").mkdir()
    before = {p: p.read_bytes() for p in work.parent.rglob("*") if p.is_file()}
    for path, why in (
            ("afile", f"is inside the code folder {work}, which is published and packaged with the component"),
            ("sub/new.json", f"is inside the code folder {work}, which is published and packaged with the component"),
            ("component.yaml", "is the spec itself"),
            (".", "is the code folder"),
            ("..", f"holds the code folder {work} ({work.parent})"),
            ("/", "is a system folder"),
            ("/etc/distcomp.json", "is inside the system folder /etc"),
            ("afile/x.json", f"cannot be created: {work}/afile is a file")):
        shown = str(work) if path == "." else path if path.startswith("/") else f"{work}/{path}"
        refused(distcomp(*command, "component.yaml", "--status-file", path, cwd=work),
                f"distcomp {command[0]}: status file {shown} {why}; {STATUS_FIX}")
    # nothing ran: no run folder, no MLflow store, every file as it was
    assert {p: p.read_bytes() for p in work.parent.rglob("*") if p.is_file()} == before
    assert files(work.parent) == {"comp", "comp/component.yaml", "comp/afile", "comp/sub"}


def test_a_status_file_under_the_code_folders_runs_folder_or_outside_it_is_written(work: Path) -> None:
    for path in ("runs/status.json", "../status.json"):
        proc = distcomp("run", "component.yaml", "--no-tracking", "--quiet", "--status-file", path, cwd=work)
        assert proc.returncode == 0, proc.stderr
        assert '"state": "succeeded"' in (work / path).read_text()


# -- the tracking store ------------------------------------------------------------------------

@pytest.mark.parametrize("command", [["run"], ["submit", "--target", "local"]], ids=["run", "submit-local"])
def test_a_sqlite_store_that_cannot_be_opened_is_refused_before_mlflow_is_asked(work: Path,
                                                                                 command: list[str]) -> None:
    """Not after MLflow's retries (over a minute and a half for a folder): one line, nothing made."""
    (work.parent / "adir").mkdir()
    before = files(work.parent)
    fix = "name a database file in a folder you can write, e.g. sqlite:///mlflow.db, or pass --no-tracking"
    for uri, why in ((f"sqlite:///{work.parent}/adir", f"{work.parent}/adir is a folder"),
                     ("sqlite:///../nowhere/m.db", f"its folder {work}/../nowhere does not exist"),
                     ("sqlite:///afile/m.db", f"{work}/afile is not a folder")):
        proc = distcomp(*command, "component.yaml", cwd=work, MLFLOW_TRACKING_URI=uri)
        refused(proc, f"distcomp {command[0]}: MLflow tracking: MLFLOW_TRACKING_URI={uri!r}: {why}; {fix}")
    assert files(work.parent) == before  # no run folder, no database


@pytest.mark.slow
def test_an_input_over_mlflows_param_limit_is_cut_and_the_run_says_so(work: Path) -> None:
    from mlflow import MlflowClient

    proc = distcomp("run", "component.yaml", "-i", "msg=" + "m" * 7000, "--quiet", cwd=work)
    assert proc.returncode == 0, proc.stderr
    assert "truncated" not in proc.stderr and "m" * 100 not in proc.stderr  # no MLflow warning with the value
    (run,) = MlflowClient(f"sqlite:///{work / 'mlflow.db'}").search_runs(["1"])
    assert run.data.params["msg"] == "m" * 6000  # MLflow's limit, cut as MLflow cuts it
    assert run.data.tags["distcomp.truncated_param.msg"] == ("7000 characters, over MLflow's limit: the param holds "
                                                             "the first 6000")


# -- every bad input in one pass ----------------------------------------------------------------

TRAIN_SPEC = """\
name: train
type: DistributedComponent
inputs:
  epochs: {type: Integer, default: 5, min: 1}
  lr: {type: Float, default: 0.05, min: 0.0}
  data: {type: AnyDirectory, optional: true}
  mode: {type: Enum, enum: [fast, slow], default: fast}
outputs:
  model: {type: AnyDirectory}
launcher:
  type: torch.distributed
  additional_arguments: python -c pass {inputs.epochs} {inputs.lr} [{inputs.data}] {inputs.mode} {outputs.model}
"""
BAD_INPUTS = ("--input", "epochs=abc", "--input", "lr=-1", "--input", "data=/nonexistent", "--input", "mode=medium",
              "--input", "epoch=2")
ALL_PROBLEMS = (
    "unknown input 'epoch' (expected one of: epochs, lr, data, mode); did you mean 'epochs'?",
    "input 'epochs' must be an integer, got 'abc'",
    "input 'lr' must be >= 0.0, got -1",
    "input 'mode' must be one of: fast, slow; got 'medium'",
    "input 'data': /nonexistent does not exist",
)


@pytest.mark.parametrize("command", [
    ["run"], ["submit", "--target", "local", "--detach"], ["submit", "--target", "slurm"],
    ["submit", "--target", "slurm", "--dryrun"],
], ids=["run", "submit-local", "submit-slurm", "dryrun-slurm"])
def test_every_bad_input_is_reported_in_one_pass_and_nothing_is_made(tmp_path: Path, command: list[str]) -> None:
    """A type error, a range error, an enum error, an unknown name and a missing path: all on the
    first try (the missing path used to come only once the others were fixed)."""
    (tmp_path / "component.yaml").write_text(TRAIN_SPEC)
    data = tmp_path / "data"
    proc = distcomp(*command, "component.yaml", *BAD_INPUTS, cwd=tmp_path, XDG_DATA_HOME=str(data))
    first, *rest = ALL_PROBLEMS
    refused(proc, f"distcomp {command[0]}: {first}", *(f"  {line}" for line in rest))
    assert files(tmp_path) == {"component.yaml"}  # no run folder, no job folder, no MLflow store


def test_the_library_reports_every_bad_input_in_one_pass(tmp_path: Path) -> None:
    import distcomp

    (tmp_path / "component.yaml").write_text(TRAIN_SPEC)
    given = {"epochs": "abc", "lr": -1, "data": "/nonexistent", "mode": "medium", "epoch": 2}
    with pytest.raises(InputError) as err:
        distcomp.run(str(tmp_path / "component.yaml"), inputs=given, run_dir=tmp_path / "runs" / "one",
                     tracking=False)
    assert str(err.value).splitlines() == [line.strip() for line in ALL_PROBLEMS]
    assert files(tmp_path) == {"component.yaml"}


def test_the_troubleshooting_page_shows_what_distcomp_prints() -> None:
    """The docs quote the real output of a bad --input set, every line of it."""
    root = Path(__file__).resolve().parents[1]
    page = (root / "docs" / "troubleshooting.md").read_text()
    command = next(line for line in page.splitlines() if line.startswith("distcomp run ") and "epochs=abc" in line)
    proc = subprocess.run([sys.executable, "-m", "distcomp", *command.split()[1:]], capture_output=True, text=True,
                          cwd=root, timeout=120)
    assert proc.returncode == 2 and len(proc.stderr.splitlines()) == 3, proc.stderr
    assert f"{command}\n```\n\n```text\n{proc.stderr}```" in page
