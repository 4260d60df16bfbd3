"""The `distcomp` command as a user runs it: a real subprocess, exit codes, stderr, no tracebacks."""

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from distcomp.spec import json_schema
from tests.conftest import CORPUS, REFERENCE


def distcomp(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "distcomp", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=60)


def no_traceback(proc: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout


def test_validate_all_valid_exits_0() -> None:
    files = [str(p) for p in sorted((CORPUS / "valid").glob("*.y*ml"))]
    proc = distcomp("validate", *files)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    # seed 003's MPI job brings its own mpirun: validate says what runs
    assert f"{files[0]}: ok: draft-mpi (mpi, 4 nodes x 4 processes; the command's own mpirun, once on the first " \
        "node)" in proc.stdout.splitlines()


def test_validate_any_invalid_exits_2_with_errors_on_stderr() -> None:
    good = CORPUS / "valid" / "sdk-minimal.yaml"
    bad = CORPUS / "invalid" / "unknown-launcher.yaml"
    proc = distcomp("validate", str(good), str(bad))
    assert proc.returncode == 2
    no_traceback(proc)
    expected = [f"{bad}:{line}" for line in bad.with_suffix(".expected").read_text().splitlines()]
    assert proc.stderr.splitlines() == expected + [f"{bad}: invalid (1 error)"]
    assert proc.stdout.splitlines() == [f"{good}: ok: minimal (mpi, 1 node x 1 process)"]


@pytest.mark.parametrize("path", sorted((CORPUS / "invalid").glob("*.y*ml")), ids=lambda p: p.name)
def test_validate_never_tracebacks_on_bad_specs(path: Path) -> None:
    proc = distcomp("validate", "-q", str(path))
    assert proc.returncode == 2
    no_traceback(proc)
    assert proc.stdout == ""


def test_validate_warnings_do_not_fail(tmp_path: Path) -> None:
    spec = REFERENCE / "peer-specs" / "azureml-v2-job-horovod-mpi.yml"
    proc = distcomp("validate", str(spec))
    assert proc.returncode == 0
    assert "code: code folder 'src' does not exist" in proc.stderr and "[warning]" in proc.stderr


def test_validate_file_problems(tmp_path: Path) -> None:
    binary = tmp_path / "binary.yaml"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    proc = distcomp("validate", str(tmp_path / "missing.yaml"), str(binary), str(tmp_path))
    no_traceback(proc)
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [f"distcomp validate: {tmp_path}: no component.yaml under this folder"]
    proc = distcomp("validate", str(tmp_path / "missing.yaml"), str(binary))
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        f"{tmp_path / 'missing.yaml'}:1:1: <file>: no such file (expected the path of a spec file)",
        f"{tmp_path / 'missing.yaml'}: invalid (1 error)",
        f"{binary}:1:1: <file>: is not UTF-8 text (byte 0) (expected a UTF-8 YAML file)",
        f"{binary}: invalid (1 error)",
    ]


def test_validate_a_folder_finds_component_files(tmp_path: Path) -> None:
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "component.yaml").write_text(
            f"name: {name}\ntype: DistributedComponent\nlauncher: {{type: mpi, additional_arguments: 'true'}}\n")
    hidden = tmp_path / ".venv" / "lib" / "site-packages" / "pkg"
    hidden.mkdir(parents=True)
    (hidden / "component.yaml").write_text("not: a spec\n")
    proc = distcomp("validate", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert len(proc.stdout.splitlines()) == 2


def test_render_prints_shell_quoted_argv() -> None:
    spec = REFERENCE / "peer-specs" / "azureml-v1-distributed-mpi.yaml"
    proc = distcomp("render", str(spec), "--input", "input_path=/data", "--input", "string_parameter=a b; rm -rf /",
                    "--output", "output_path=/out")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "python train.py --input-path /data --string-parameter 'a b; rm -rf /' --output-path /out\n"
    proc = distcomp("render", str(spec), "--json", "--input", "input_path=/data", "--output", "output_path=/out")
    assert json.loads(proc.stdout) == ["python", "train.py", "--input-path", "/data", "--output-path", "/out"]


def test_render_masks_a_secret_as_compile_does(tmp_path: Path) -> None:
    """Before: render printed a secret input in clear that compile --target local masked."""
    spec = Path(__file__).parent / "targets" / "jobs" / "supervision" / "component.yaml"
    given = ["--input", "mode=secret", "--input", "state_dir=/s", "--input", "db_password=hunter2-Sup3r",
             "--output", "result=/out"]
    proc = distcomp("render", str(spec), *given, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.endswith("--state-dir /s --password *** --result /out\n"), proc.stdout
    proc = distcomp("render", str(spec), "--json", *given, cwd=tmp_path)
    argv = json.loads(proc.stdout)
    assert argv[argv.index("--password") + 1] == "***" and "hunter2" not in proc.stdout
    proc = distcomp("compile", "--target", "local", str(spec), *given, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "  - --password\n  - '***'\n" in proc.stdout and "hunter2" not in proc.stdout


def test_render_defaults_outputs_under_cwd_and_fills_env(tmp_path: Path) -> None:
    spec = CORPUS / "valid" / "sdk-horovod.yaml"
    proc = distcomp("render", str(spec), "--json", cwd=tmp_path)  # what each rank executes: its shell reads $VAR
    assert json.loads(proc.stdout) == ["/bin/sh", "-c", "python src/train.py --hostfile $AZUREML_MPI_HOSTFILE"]
    proc = distcomp("render", str(spec), "--env", "AZUREML_MPI_HOSTFILE=/tmp/my hosts", cwd=tmp_path)
    assert proc.stdout == "python src/train.py --hostfile '/tmp/my hosts'\n"  # as one rank with that value
    proc = distcomp("render", str(spec), "--json", "--env", "AZUREML_MPI_HOSTFILE=/tmp/hosts", cwd=tmp_path)
    assert json.loads(proc.stdout) == ["/bin/sh", "-c", "python src/train.py --hostfile /tmp/hosts"]
    proc = distcomp("render", str(CORPUS / "valid" / "v2-component.yml"), "--json", "-i", "data=d", cwd=tmp_path)
    argv = json.loads(proc.stdout)
    assert argv[argv.index("--model") + 1] == str(tmp_path / "outputs" / "model")
    assert argv[argv.index("--data") + 1] == str(tmp_path / "d")


def test_render_bad_inputs_exit_2_without_traceback() -> None:
    spec = CORPUS / "valid" / "sdk-full.yaml"
    proc = distcomp("render", str(spec), "--input", "epochs=many", "--output", "nope=/x", "--input", "bad")
    assert proc.returncode == 2
    no_traceback(proc)
    assert proc.stderr == "distcomp render: --input 'bad': expected NAME=VALUE\n"
    proc = distcomp("render", str(spec), "--input", "epochs=many", "--output", "nope=/x")
    assert proc.returncode == 2  # every problem at once: the unknown output and the inputs
    assert proc.stderr.splitlines() == [f"{spec}: unknown output 'nope' (expected one of: model)",
                                        f"{spec}: missing required input 'data' (give it with --input data=VALUE)",
                                        f"{spec}: input 'epochs' must be an integer, got 'many'"]
    proc = distcomp("render", str(spec), "--input", "epochs=many")
    assert proc.stderr.splitlines() == [f"{spec}: missing required input 'data' (give it with --input data=VALUE)",
                                        f"{spec}: input 'epochs' must be an integer, got 'many'"]
    proc = distcomp("render", str(CORPUS / "invalid" / "enum-default.yaml"))
    assert proc.returncode == 2 and "inputs.optimizer.default" in proc.stderr
    no_traceback(proc)


def test_schema_command_prints_the_generated_schema(tmp_path: Path) -> None:
    proc = distcomp("schema")
    assert proc.returncode == 0
    assert json.loads(proc.stdout) == json_schema("sdk")
    out = tmp_path / "s.json"
    assert distcomp("schema", "--dialect", "v2", "--out", str(out)).returncode == 0
    written = json.loads(out.read_text())
    assert written.pop("$comment").startswith("Written by distcomp")  # the mark: --out may write it again
    assert written == json_schema("v2")


def test_usage_errors_exit_2() -> None:
    proc = distcomp("validate")
    assert proc.returncode == 2 and "usage:" in proc.stderr
    proc = distcomp("frobnicate")
    assert proc.returncode == 2


def test_console_script_is_installed() -> None:
    exe = Path(sys.executable).with_name("distcomp")
    proc = subprocess.run([str(exe), "--version"], capture_output=True, text=True, env={**os.environ})
    assert proc.returncode == 0 and proc.stdout.startswith("distcomp ")


def test_validate_imports_no_heavy_framework() -> None:
    """validate must stay fast: no mlflow, kfp, azure, torch or tensorflow on its path."""
    spec = CORPUS / "valid" / "sdk-full.yaml"
    code = ("import sys; from distcomp.cli import main; rc = main(['validate', '-q', sys.argv[1]]); "
            "heavy = sorted({m.split('.')[0] for m in sys.modules} & "
            "{'mlflow', 'kfp', 'azure', 'torch', 'tensorflow', 'deepspeed', 'mpi4py', 'jsonschema', 'pydantic'}); "
            "print(rc, heavy)")
    proc = subprocess.run([sys.executable, "-c", code, str(spec)], capture_output=True, text=True, timeout=60)
    assert proc.stdout.strip() == "0 []", proc.stderr


def _commands(parser: argparse.ArgumentParser) -> set[str]:
    return {name for action in parser._subparsers._group_actions for name in action.choices}  # type: ignore[union-attr]


def test_a_command_builds_only_its_own_group_of_parsers() -> None:
    """`distcomp run ...` builds the parsers of its own module only (a start-time saving); every
    command has its group, and each group is exactly what its module adds."""
    from distcomp.cli import GROUPS, build_parser

    every = _commands(build_parser())
    assert every == set(GROUPS)
    for command, group in GROUPS.items():
        assert _commands(build_parser([command, "x"])) == {c for c, g in GROUPS.items() if g == group}
    assert _commands(build_parser(["frobnicate"])) == every  # argparse lists them all in its error
    assert _commands(build_parser(["run"], every=True)) == every


def test_help_before_a_command_lists_every_command() -> None:
    proc = distcomp("-h", "run")
    assert proc.returncode == 0 and "validate" in proc.stdout and "submit" in proc.stdout
    proc = distcomp("run", "-h")
    assert proc.returncode == 0 and proc.stdout.startswith("usage: distcomp run ")


def test_the_program_freezes_its_objects_for_the_exit_and_a_caller_is_left_alone() -> None:
    """``main()`` as the program (no argv: the console script, python -m distcomp) moves what it
    made out of the exit's garbage collections (gc.freeze: ~10 ms of every command's end); a
    caller's ``main([...])`` leaves its process's collector as it was."""
    spec = CORPUS / "valid" / "sdk-full.yaml"
    code = ("import gc, os, sys; from distcomp.cli import main; args = ['validate', '-q', sys.argv[1]]; "
            "sys.argv = ['distcomp', *args]; rc = main(None if os.environ['AS'] == 'program' else args); "
            "print(rc, gc.get_freeze_count() > 0)")
    for how, frozen in (("program", "True"), ("call", "False")):
        proc = subprocess.run([sys.executable, "-c", code, str(spec)], capture_output=True, text=True, timeout=60,
                              env={**os.environ, "AS": how})
        assert proc.stdout.split() == ["0", frozen], proc.stderr


FIRST_STEP = Path(__file__).resolve().parents[1] / "examples" / "first-step" / "component.yaml"
HINT = "-o (--output) gives a component output as NAME=PATH"


@pytest.mark.parametrize("args, line", [
    (["compile", "--target", "kfp", str(FIRST_STEP), "-o", "x.yaml"],
     f"distcomp compile: -o x.yaml: {HINT}; write to a file with --out x.yaml"),
    (["compile", "--target", "local", str(FIRST_STEP), "-ox.yaml"],  # local takes -o: as --output
     f"distcomp compile: -o x.yaml: {HINT}; write to a file with --out x.yaml"),
    (["render", str(FIRST_STEP), "-o", "x.txt"],
     f"distcomp render: -o x.txt: {HINT}; render prints to stdout: redirect it (> FILE)"),
    (["schema", "-o", "x.json"], f"distcomp schema: -o x.json: {HINT}; write to a file with --out x.json"),
    (["schema", "--output=x.json"], f"distcomp schema: --output x.json: {HINT}; write to a file with --out x.json"),
], ids=["compile-kfp", "compile-local", "render", "schema", "schema-output"])
def test_o_given_a_file_says_to_use_out(tmp_path: Path, args: list[str], line: str) -> None:
    """-o is --output NAME=PATH everywhere; a file is --out FILE: one line says so, nothing is written."""
    proc = distcomp(*args, cwd=tmp_path)
    assert (proc.returncode, proc.stdout, proc.stderr) == (2, "", line + "\n")
    assert list(tmp_path.iterdir()) == []


def test_o_is_a_component_output_in_compile_and_out_the_file(tmp_path: Path) -> None:
    proc = distcomp("compile", "--target", "local", str(FIRST_STEP), "-o", f"result={tmp_path / 'res'}",
                    "--out", "plan.yaml", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == "distcomp compile: wrote local plan of first-step@1.0.0 to plan.yaml\n"
    assert f"--result {tmp_path / 'res'}" in (tmp_path / "plan.yaml").read_text()
