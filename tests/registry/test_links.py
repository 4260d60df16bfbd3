"""Symbolic links in a code folder: one leading outside it is refused (its target would be copied
into a shared registry), unless the publisher allows it; loops are a clear error, not a crash."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from distcomp.registry import Registry
from distcomp.registry._manifest import read_manifest
from tests.conftest import REPO
from tests.registry.conftest import Make, refused


def nothing_stored(registry: Registry) -> bool:
    root = Path(registry.location)
    return not (root / "demo").exists() and not any((root / ".staging").iterdir())


def publish_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "distcomp", "registry", "publish", *args], capture_output=True,
                          text=True, cwd=REPO, timeout=120)


@pytest.mark.parametrize("target", ["/etc/passwd", "outside/secret.txt"])
def test_a_link_to_a_file_outside_the_code_folder_is_refused(registry: Registry, make: Make, tmp_path: Path,
                                                             target: str) -> None:
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.txt").write_text("token=abc\n")
    src = make()
    (src / "pkg").mkdir()
    link = src / "pkg" / "data.txt"
    link.symlink_to(target if target.startswith("/") else os.path.relpath(tmp_path / target, link.parent))
    resolved = os.path.realpath(link)
    message = refused(lambda: registry.publish(src))
    assert message == (f"{src / 'component.yaml'}: {link} is a symbolic link to {resolved}, outside the code "
                       "folder; copy the file in, or pass --allow-external-links")
    assert nothing_stored(registry)


def test_the_cli_refuses_an_outside_link_and_stores_a_copy_when_allowed(registry: Registry, make: Make) -> None:
    src = make()
    (src / "passwd.txt").symlink_to("/etc/passwd")
    proc = publish_cli(str(src), "--registry", registry.location)
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == (f"distcomp registry: {src / 'component.yaml'}: {src / 'passwd.txt'} is a symbolic link "
                           "to /etc/passwd, outside the code folder; copy the file in, or pass "
                           "--allow-external-links\n")
    assert nothing_stored(registry)

    allowed = publish_cli(str(src), "--allow-external-links", "--registry", registry.location)
    assert allowed.returncode == 0, allowed.stderr
    assert allowed.stdout.startswith("published demo@1.0.0 (sha256 ")
    assert allowed.stderr == ("distcomp registry: note: demo@1.0.0: passwd.txt is stored as a copy of /etc/passwd "
                              "(a symbolic link outside the code folder, allowed by --allow-external-links)\n")
    stored = Path(registry.resolve("demo@1.0.0").spec_path).parent / "passwd.txt"
    assert not stored.is_symlink() and stored.read_bytes() == Path("/etc/passwd").read_bytes()


def test_the_library_says_which_links_it_copied(registry: Registry, make: Make, tmp_path: Path) -> None:
    (tmp_path / "shared.py").write_text("SHARED = 1\n")
    src = make()
    (src / "shared.py").symlink_to(tmp_path / "shared.py")
    done = registry.publish(src, allow_external_links=True)
    assert done.copied == (("shared.py", str(tmp_path / "shared.py")),)
    assert sorted(read_manifest(Path(done.location), "demo", "1.0.0").files) == ["component.yaml", "run.py",
                                                                                "shared.py"]


def test_a_conda_file_linked_from_outside_is_refused(registry: Registry, make: Make) -> None:
    """It used to store /etc/passwd twice: once as env.yaml, once as etc/passwd under the version."""
    src = make()
    spec = src / "component.yaml"
    spec.write_text(spec.read_text() + "environment:\n  conda_file: env.yaml\n")
    (src / "env.yaml").symlink_to("/etc/passwd")
    assert refused(lambda: registry.publish(src)) == (
        f"{spec}: {src / 'env.yaml'} is a symbolic link to /etc/passwd, outside the code folder; copy the file in, "
        "or pass --allow-external-links")
    assert nothing_stored(registry)


def test_a_link_to_a_file_publishing_leaves_out_is_refused(registry: Registry, make: Make) -> None:
    src = make()
    (src / ".env").write_text("API_TOKEN=abc\n")
    (src / "settings.txt").symlink_to(".env")
    assert refused(lambda: registry.publish(src)) == (
        f"{src / 'component.yaml'}: {src / 'settings.txt'} is a symbolic link to {src / '.env'}, which publishing "
        "leaves out (tool folders, bytecode, .env, what a run writes); copy the file in if it belongs in the "
        "component, or remove the link")
    assert nothing_stored(registry)


@pytest.mark.parametrize("links", [{"a.py": "b.py", "b.py": "a.py"}, {"self.py": "self.py"},
                                   {"sub/x": "y", "sub/y": "x"}], ids=["pair", "self", "nested"])
def test_a_symlink_loop_is_a_clear_error(registry: Registry, make: Make, links: dict[str, str]) -> None:
    src = make()
    for name, target in links.items():
        (src / name).parent.mkdir(exist_ok=True)
        (src / name).symlink_to(target)
    proc = publish_cli(str(src), "--registry", registry.location)
    assert (proc.returncode, proc.stdout) == (2, "")
    # os.walk lists a folder's names in no set order: either link of a pair may be the one named
    assert proc.stderr in {f"distcomp registry: {src / 'component.yaml'}: {src / name} in the code folder is a "
                           f"symbolic link loop ({Path(name).name} -> {target}); remove it to publish\n"
                           for name, target in links.items()}, proc.stderr
    assert nothing_stored(registry)


def test_a_code_folder_that_is_a_loop_is_a_clear_error(registry: Registry, make: Make) -> None:
    src = make(code="loop")
    (src / "loop").symlink_to("loop")
    proc = publish_cli(str(src), "--registry", registry.location)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert "symbolic link loop" in proc.stderr and "loop" in proc.stderr
    assert not (Path(registry.location) / "demo").exists()
