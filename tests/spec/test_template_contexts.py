"""A value reaches the program as exactly the text given, whatever shell context its placeholder
sits in: plain, "...", $( ), "$( )", backticks, ${X:-...}, "${X:-...}", a here-document, a
comment. Each case RUNS the rendered line with /bin/sh (dash here) and with bash (Azure ML's and
many Slurm nodes' shell); `rec` appends the argv it got to a file, so what is checked is what the
program inside each context received, and that a hostile value created nothing. A context no
quoting makes safe (`bash -c '...'`, `$(( ))`, ...) is refused by `distcomp validate` at its
FILE:LINE:COL."""

from __future__ import annotations

import json
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from distcomp.spec import bind_inputs, loads

V2 = """
type: command
inputs:
  name: {{type: string}}
command: {command}
distribution: {{type: pytorch}}
"""

REC = "#!/bin/sh\nprintf '%s\\0' \"$@\" >>\"$REC_FILE\"\nprintf '\\1' >>\"$REC_FILE\"\n"  # each call's argv
T = "#!/bin/sh\nexit 0\n"

# (template, what `rec` gets for value V); every line starts `cd . &&` so it runs through a shell
CONTEXTS = {
    "plain": ("cd . && rec ${{inputs.name}}", lambda v: [v]),
    "double quotes": ('cd . && rec "x ${{inputs.name}} y"', lambda v: [f"x {v} y"]),
    "$( )": ("cd . && t $(rec ${{inputs.name}})", lambda v: [v]),
    '"$( )"': ('cd . && t "$(rec ${{inputs.name}})"', lambda v: [v]),
    '"$( "..." )"': ('cd . && t "$(rec "<${{inputs.name}}>")"', lambda v: [f"<{v}>"]),
    "backticks": ("cd . && t `rec ${{inputs.name}}`", lambda v: [v]),
    '"backticks"': ('cd . && t "`rec ${{inputs.name}}`"', lambda v: [v]),
    "${X:-}": ("cd . && rec ${UNSET_X:-${{inputs.name}}}", lambda v: [v]),
    '"${X:-}"': ('cd . && rec "${UNSET_X:-${{inputs.name}}}"', lambda v: [v]),
    '"${X:-"..."}"': ('cd . && rec "${UNSET_X:-"<${{inputs.name}}>"}"', lambda v: [f"<{v}>"]),
    "$( ${X:-} )": ('cd . && t "$(rec "${UNSET_X:-${{inputs.name}}}")"', lambda v: [v]),
    "here-document": ('rec "$(cat <<EOF\n<${{inputs.name}}>\nEOF\n)"', lambda v: [f"<{v}>"]),
    "comment": ("cd . && rec ok # note ${{inputs.name}}", lambda v: ["ok"]),
}
VALUES = ["$(touch PWNED)", "`touch PWNED`", "two words", "it's", 'a"b', "$HOME", "\\", "a\nb", "",
          "}", "a'b\"c`d$e\\f", "${HOME}"]
SHELLS = {"sh": ["/bin/sh", "-c"], "bash": ["bash", "-c"]}


@pytest.fixture(scope="module")
def bin_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("bin")
    for name, text in (("rec", REC), ("t", T)):
        (folder / name).write_text(text)
        (folder / name).chmod(stat.S_IRWXU)
    return folder


def received(command: str, value: str, shell: str, bin_dir: Path, tmp_path: Path) -> list[list[str]]:
    """Render ``command`` with ``value``, run the line with ``shell``: each call of `rec`'s argv."""
    spec = loads(V2.format(command=json.dumps(command)))
    argv = spec.render(bind_inputs(spec, {"name": value}), {})
    assert argv[:2] == ["/bin/sh", "-c"], argv
    rec = tmp_path / "rec"
    rec.write_bytes(b"")
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "REC_FILE": str(rec), "HOME": "/home/someone"}
    subprocess.run([*SHELLS[shell], argv[2]], env=env, cwd=tmp_path, check=True, capture_output=True)
    calls = rec.read_text().split("\1")[:-1]
    return [call.split("\0")[:-1] for call in calls]


@pytest.mark.parametrize("shell", SHELLS)
@pytest.mark.parametrize("value", VALUES)
@pytest.mark.parametrize("context", CONTEXTS)
def test_the_program_gets_the_value_exactly(context: str, value: str, shell: str, bin_dir: Path,
                                            tmp_path: Path) -> None:
    pwned = tmp_path / "pwned"
    value = value.replace("PWNED", str(pwned))
    template, expect = CONTEXTS[context]
    assert received(template, value, shell, bin_dir, tmp_path) == [expect(value)]
    assert not pwned.exists()


def test_render_shows_a_variable_where_a_value_would_be_parsed_again() -> None:
    """`distcomp render`'s line: the value quoted once at the start, referenced where it is used."""
    spec = loads(V2.format(command=json.dumps('python e.py --msg "${UNSET_X:-${{inputs.name}}}" --n ${{inputs.name}}')))
    line = spec.shell_line(bind_inputs(spec, {"name": "it's"}), {})
    assert line == "dc_in_name='it'\"'\"'s'; python e.py --msg \"${UNSET_X:-${dc_in_name}}\" --n \"${dc_in_name}\""
    plain = loads(V2.format(command=json.dumps('cd . && python e.py "--n=${{inputs.name}}"')))
    assert plain.shell_line(bind_inputs(plain, {"name": "a b"}), {}) == "cd . && python e.py \"--n=\"'a b'\"\""


REFUSED = [
    ("bash -c 'echo ${{inputs.name}}'", "'bash -c' gives another shell"),
    ('sh -c "python e.py ${{inputs.name}}"', "'sh -c' gives another shell"),
    ('bash -lc "$(echo ${{inputs.name}})"', "'bash -lc' gives another shell"),
    ("eval python e.py ${{inputs.name}}", "'eval' gives another shell"),
    ("echo $(( ${{inputs.name}} + 1 ))", "inside $(( ))"),
    ("cat <<'EOF'\n${{inputs.name}}\nEOF", "quoted end word"),
    ("echo ${X${{inputs.name}}}", "inside a ${NAME} name"),
    ("echo $(printf '%s' '${{inputs.name}}')", "inside '...' within a nested part"),
    ("echo $(date) 'at ${{inputs.name}}'", "inside '...' in a line that also uses $( )"),
]


@pytest.mark.parametrize("command, message", REFUSED)
def test_validate_refuses_a_context_no_quoting_makes_safe(command: str, message: str, tmp_path: Path) -> None:
    spec = tmp_path / "c.yaml"
    text = V2.format(command=json.dumps(command))
    spec.write_text(text)
    proc = subprocess.run([sys.executable, "-m", "distcomp", "validate", str(spec)],
                          capture_output=True, text=True, timeout=60)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2 and message in out and "Traceback" not in out, out
    line, col = next((n, row.index("${{inputs.name}}")) for n, row in enumerate(text.splitlines(), 1)
                     if "${{inputs.name}}" in row)
    assert f"{spec}:{line}:{col + 1}: command: ${{{{inputs.name}}}} is inside" in out, out


def test_the_suggested_form_passes_the_value_as_an_argument(bin_dir: Path, tmp_path: Path) -> None:
    """What the refusal's hint says to write instead gets the value exactly, in bash -c too."""
    pwned = tmp_path / "pwned"
    value = f"$(touch {pwned}) it's"
    got = received("""cd . && bash -c 'rec "$1"' _ ${{inputs.name}}""", value, "sh", bin_dir, tmp_path)
    assert got == [[value]] and not pwned.exists()
