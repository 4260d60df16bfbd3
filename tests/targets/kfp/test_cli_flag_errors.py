"""A KFP compile error names what its caller gives (issue 34): ``distcomp compile --target kfp``
names the flags (``--volume``, ``--image``, ``--nodes``), exit 2, one line, nothing created;
``load_component`` from Python still names its parameters (``shared_volume=``, ``image=``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from distcomp.kfp import KfpTargetError, load_component
from tests.targets._jobs import clean_env
from tests.targets.kfp.conftest import ECHO

PYTHON_WORDS = ("shared_volume", "pass image=", "image=IMAGE", "nodes=1", "job_options")

CASES = [  # flags; what the message must say
    (("--nodes", "2"), ("pass --volume CLAIM:MOUNT_PATH", "or --nodes 1")),
    (("--nodes", "2", "--volume", "data:/mnt/data"), ("pass --image IMAGE",)),
    (("--nodes", "2", "--volume", "Bad_Claim:/mnt", "--image", "x"),
     ("--volume must be CLAIM:MOUNT_PATH", "(got 'Bad_Claim:/mnt')")),
    (("--job-option", "image=x"), ("the step sets image itself (pass --image IMAGE)",)),
    (("--job-option", "volumes=a:/b"), ("the step sets volumes itself (pass --volume CLAIM:MOUNT_PATH)",)),
    (("--job-option=--bogus=1",), ("--job-option '--bogus=1'", "--job-option NAME=VALUE")),
]


@pytest.mark.slow
@pytest.mark.parametrize("flags, says", CASES, ids=["nodes", "image", "claim", "job-image", "job-volume", "job-flag"])
def test_the_cli_names_its_flags(tmp_path: Path, flags: tuple[str, ...], says: tuple[str, ...]) -> None:
    out = tmp_path / "new" / "step.yaml"
    proc = subprocess.run([sys.executable, "-m", "distcomp", "compile", "--target", "kfp", str(ECHO), *flags,
                           "--out", str(out)], capture_output=True, text=True, timeout=120, env=clean_env(),
                          cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    message = proc.stderr.strip()
    assert len(message.splitlines()) == 1 and message.startswith("distcomp compile: "), message
    for words in says:
        assert words in message, message
    assert not any(word in message for word in PYTHON_WORDS), message  # no Python parameter names
    assert not (tmp_path / "new").exists()  # refused before anything was created


def test_python_names_the_parameters(tmp_path: Path) -> None:
    def message(**kwargs: object) -> str:
        with pytest.raises(KfpTargetError) as info:
            load_component(ECHO, **kwargs)  # type: ignore[arg-type]
        return str(info.value)

    nodes = message(nodes=2)
    assert "pass shared_volume=(CLAIM, MOUNT_PATH)" in nodes and "or nodes=1" in nodes and "--volume" not in nodes
    image = message(nodes=2, shared_volume=("data", "/mnt/data"))
    assert "pass image=IMAGE" in image and "--image" not in image
    claim = message(nodes=2, shared_volume=("Bad_Claim", "/mnt"), image="x")
    assert "shared_volume must be (CLAIM, MOUNT_PATH)" in claim and "('Bad_Claim', '/mnt')" in claim
    job = message(nodes=2, shared_volume=("data", "/mnt/data"), image="x", job_options={"image": "y"})
    assert "the step sets image itself (pass image=IMAGE)" in job
    assert "nproc_per_node must be a whole number >= 1" in message(nproc_per_node=0)


def test_a_target_compile_leaves_python_spelling_to_python(tmp_path: Path) -> None:
    """The flag spelling holds only inside the target's call: the next Python call speaks Python."""
    import distcomp

    compiled = distcomp.compile(ECHO, "kfp", nodes=2)
    with pytest.raises(KfpTargetError, match="pass --volume CLAIM:MOUNT_PATH"):
        compiled.write(tmp_path / "step.yaml")
    with pytest.raises(KfpTargetError, match=r"pass shared_volume=\(CLAIM, MOUNT_PATH\)"):
        load_component(ECHO, nodes=2)
