"""Publishing: what is stored, where, read-only; same content is a no-op, other content is refused."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from distcomp.registry import Published, Registry, RegistryError
from distcomp.registry._manifest import content_hash, hash_file, read_manifest
from distcomp.spec import load
from tests.registry.conftest import refused, SPEC, Make


def test_publish_stores_the_spec_and_its_code_under_name_and_version(registry: Registry, make: Make) -> None:
    src = make(body="print('v1')\n")
    done = registry.publish(src / "component.yaml")
    stored = Path(registry.location) / "demo" / "1.0.0"
    assert done == Published("demo", "1.0.0", done.sha256, str(stored), True)
    assert sorted(p.name for p in stored.iterdir()) == ["component.yaml", "manifest.json", "run.py"]
    assert (stored / "run.py").read_text() == "print('v1')\n"
    assert (stored / "component.yaml").read_bytes() == (src / "component.yaml").read_bytes()  # byte for byte
    manifest = json.loads((stored / "manifest.json").read_text())
    assert {k: manifest[k] for k in ("format", "name", "version", "spec", "code", "sha256")} == {
        "format": 1, "name": "demo", "version": "1.0.0", "spec": "component.yaml", "code": ".", "sha256": done.sha256}
    assert manifest["files"] == {"component.yaml": {"sha256": hash_file(src / "component.yaml"), "executable": False},
                                 "run.py": {"sha256": hash_file(src / "run.py"), "executable": False}}
    # the content hash is the SHA-256 of the sorted listing "SHA256 x|- PATH"
    listing = "".join(f"{hash_file(src / p)} - {p}\n" for p in ("component.yaml", "run.py"))
    import hashlib
    assert done.sha256 == hashlib.sha256(listing.encode()).hexdigest()
    assert manifest["summary"]["display_name"] == "Demo job"
    assert manifest["summary"]["inputs"] == {"steps": {"type": "integer", "optional": False, "default": 1,
                                                       "description": ""}}
    assert manifest["published"].endswith("Z") and manifest["user"]
    assert not any((Path(registry.location) / ".staging").iterdir())  # nothing left behind


def test_a_folder_means_its_component_yaml(registry: Registry, make: Make) -> None:
    assert registry.publish(make()).name == "demo"


def test_stored_versions_are_read_only(registry: Registry, make: Make) -> None:
    src = make()
    (src / "tool.sh").write_text("#!/bin/sh\necho hi\n")
    (src / "tool.sh").chmod(0o755)
    (src / "pkg").mkdir()
    (src / "pkg" / "mod.py").write_text("X = 1\n")
    registry.publish(src)
    stored = Path(registry.location) / "demo" / "1.0.0"
    modes = {p.relative_to(stored).as_posix(): stat.S_IMODE(p.stat().st_mode) for p in [stored, *stored.rglob("*")]}
    assert modes == {".": 0o555, "pkg": 0o555, "pkg/mod.py": 0o444, "component.yaml": 0o444, "run.py": 0o444,
                     "tool.sh": 0o555, "manifest.json": 0o444}
    assert read_manifest(stored, "demo", "1.0.0").files["tool.sh"].executable is True


def test_same_content_again_is_a_no_op(registry: Registry, make: Make) -> None:
    first = registry.publish(make(body="x = 1\n"))
    again = registry.publish(make(body="x = 1\n"))  # another folder, the same files
    assert first.created and not again.created
    assert again == Published("demo", "1.0.0", first.sha256, first.location, False)


def test_different_content_under_a_published_version_is_refused(registry: Registry, make: Make) -> None:
    first = registry.publish(make(body="x = 1\n"))
    second = make(body="x = 2\n")
    with pytest.raises(RegistryError) as info:
        registry.publish(second)
    theirs = content_hash(read_manifest(Path(first.location), "demo", "1.0.0").files)
    assert theirs == first.sha256
    import hashlib
    yours = hashlib.sha256("".join(f"{hash_file(second / p)} - {p}\n" for p in ("component.yaml", "run.py"))
                           .encode()).hexdigest()
    assert str(info.value) == (f"demo@1.0.0 is already published with different content (sha256 {first.sha256[:12]}, "
                               f"yours {yours[:12]}); a published version never changes: publish a new version")
    assert (Path(first.location) / "run.py").read_text() == "x = 1\n"
    assert registry.publish(make(body="x = 2\n", version="1.0.1")).created


def test_equal_versions_share_one_folder(registry: Registry, make: Make) -> None:
    """1.2 and 1.2.0 are one version: the second spelling cannot bring other content."""
    assert registry.publish(make(version="1.2", body="a\n")).version == "1.2.0"
    with pytest.raises(RegistryError, match="demo@1.2.0 is already published with different content"):
        registry.publish(make(version="1.2.0", body="b\n"))
    assert registry.resolve("demo@1.2").version == "1.2.0"


def test_what_is_left_out_of_the_snapshot(registry: Registry, make: Make) -> None:
    src = make()
    for rel in (".git/HEAD", "__pycache__/run.cpython-311.pyc", "pkg/__pycache__/m.pyc", "pkg/m.pyc", ".venv/bin/x",
                "runs/r1/status.json", "mlruns/0/meta.yaml", "outputs/model/w.pt", "mlflow.db", "mlflow.db.lock",
                ".DS_Store", "pkg/runs/keep.txt", "pkg/outputs.py", "pkg/m.py", ".env.example", ".env", "pkg/.env"):
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_text(rel)
    done = registry.publish(src)
    files = read_manifest(Path(done.location), "demo", "1.0.0").files
    assert sorted(files) == [".env.example", "component.yaml", "pkg/m.py", "pkg/outputs.py", "pkg/runs/keep.txt",
                             "run.py"]


def test_a_link_to_a_file_in_the_code_folder_is_stored_as_the_file(registry: Registry, make: Make) -> None:
    src = make()
    (src / "lib").mkdir()
    (src / "lib" / "shared.py").write_text("SHARED = 1\n")
    (src / "shared.py").symlink_to("lib/shared.py")
    done = registry.publish(src)
    stored = Path(done.location) / "shared.py"
    assert not stored.is_symlink() and stored.read_text() == "SHARED = 1\n"
    assert done.copied == ()  # nothing came from outside


def test_a_link_to_a_folder_is_refused(registry: Registry, make: Make, tmp_path: Path) -> None:
    src = make()
    (tmp_path / "data").mkdir()
    (src / "data").symlink_to(tmp_path / "data")
    message = refused(lambda: registry.publish(src))
    assert message == (f"{src / 'component.yaml'}: the code folder holds a symbolic link to a folder, "
                       f"{src / 'data'}; the registry stores plain files: put the folder itself there, or "
                       "remove the link")
    assert not (Path(registry.location) / "demo").exists()


def test_a_dangling_link_is_refused(registry: Registry, make: Make) -> None:
    src = make()
    (src / "gone.py").symlink_to(src / "nowhere.py")
    with pytest.raises(RegistryError, match="gone.py in the code folder is a symbolic link that leads nowhere; "
                                            "remove it to publish"):
        registry.publish(src)


def test_a_code_folder_beside_the_spec_keeps_its_layout(registry: Registry, tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / "specs").mkdir(parents=True)
    (project / "src").mkdir()
    (project / "src" / "run.py").write_text("print(1)\n")
    (project / "unrelated.txt").write_text("not published\n")
    spec_file = project / "specs" / "component.yaml"
    spec_file.write_text(SPEC.format(name="split", version="0.1.0", title="t", description="d", framework="f",
                                     code="../src"))
    done = registry.publish(spec_file)
    stored = Path(done.location)
    assert sorted(read_manifest(stored, "split", "0.1.0").files) == ["specs/component.yaml", "src/run.py"]
    resolved = registry.resolve("split@0.1.0")
    assert resolved.spec_path == stored / "specs" / "component.yaml"
    spec = load(resolved.spec_path)
    assert spec.code == (stored / "src").resolve()
    assert (spec.code / "run.py").read_text() == "print(1)\n"


def test_an_absolute_code_folder_is_refused(registry: Registry, make: Make, tmp_path: Path) -> None:
    code = tmp_path / "elsewhere"
    code.mkdir()
    src = make(code=str(code))
    message = refused(lambda: registry.publish(src))
    assert message == (f"{src / 'component.yaml'}: code: must be a folder path relative to the spec, without "
                       f"symbolic links (it is {code}); the stored copy would use another folder")
    assert not (Path(registry.location) / "demo").exists()
    assert not any((Path(registry.location) / ".staging").iterdir())


def test_a_missing_code_folder_is_refused(registry: Registry, make: Make) -> None:
    src = make(code="src")
    message = refused(lambda: registry.publish(src))
    assert message == (f"{src / 'component.yaml'}: code folder {src / 'src'} does not exist; a published "
                       "component carries its code")


def test_an_invalid_spec_is_refused_with_its_errors(registry: Registry, make: Make) -> None:
    src = make()
    spec = src / "component.yaml"
    spec.write_text(spec.read_text().replace("torch.distributed", "pytorc"))
    with pytest.raises(RegistryError) as info:
        registry.publish(spec)
    lines = str(info.value).splitlines()
    assert lines[0] == f"{spec}: not published: the spec is not valid:"
    assert lines[1].startswith(f"  {spec}:13:9: launcher.type: unknown launcher 'pytorc'")


def test_a_spec_without_a_version_is_refused(registry: Registry, make: Make) -> None:
    src = make()
    spec = src / "component.yaml"
    spec.write_text(spec.read_text().replace("version: 1.0.0\n", ""))
    message = refused(lambda: registry.publish(spec))
    assert message == f"{spec}: demo has no version; add one (e.g. `version: 1.0.0`) to publish it"


@pytest.mark.parametrize(("name", "version", "message"), [
    ("Demo", "1.0.0", "invalid component name 'Demo': registry names are 1-100 lowercase letters, digits, '.', '_' "
                      "or '-', starting with a letter or digit; did you mean 'demo'?"),
    ("demo", "one", "invalid version 'one': expected a PEP 440 version such as 1.2.0"),
])
def test_names_and_versions_are_checked(registry: Registry, make: Make, name: str, version: str, message: str) -> None:
    src = make(name=name, version=version)
    with pytest.raises(RegistryError) as info:
        registry.publish(src)
    assert str(info.value).endswith(message)


def test_stray_entries_are_not_versions(registry: Registry, make: Make) -> None:
    registry.publish(make())
    root = Path(registry.location)
    (root / "demo" / "9.9").mkdir()  # not a canonical version folder
    (root / "demo" / "notes").mkdir()
    (root / "NotAName").mkdir()
    assert [v.version for v in registry.versions("demo")] == ["1.0.0"]
    assert registry.resolve("demo@latest").version == "1.0.0"
    assert registry.names() == ["demo"]


def test_a_read_only_registry_still_resolves(registry: Registry, make: Make) -> None:
    registry.publish(make())
    root = Path(registry.location)
    os.chmod(root, 0o555)
    try:
        assert registry.resolve("demo@latest").version == "1.0.0"
    finally:
        os.chmod(root, 0o755)


def test_an_old_leftover_of_a_crashed_publish_is_cleaned(registry: Registry, make: Make) -> None:
    registry.publish(make())
    staging = Path(registry.location) / ".staging"
    old, fresh = staging / "demo@2.0.0.crashed", staging / "demo@3.0.0.running"
    for folder in (old, fresh):
        (folder / "sub").mkdir(parents=True)
        (folder / "sub" / "f").write_text("x")
        os.chmod(folder / "sub", 0o555)
    os.utime(old, (1, 1))
    assert [v.version for v in registry.versions("demo")] == ["1.0.0"]  # never seen as versions
    registry.publish(make(version="1.1.0"))
    assert sorted(p.name for p in staging.iterdir()) == ["demo@3.0.0.running"]


def test_a_registry_inside_the_code_folder_is_left_out(make: Make) -> None:
    from distcomp.registry import open_registry

    src = make()
    inside = open_registry(str(src / "registry"))
    assert inside.publish(src).created
    assert inside.publish(make(version="1.1.0")).created
    assert sorted(read_manifest(src / "registry" / "demo" / "1.0.0", "demo", "1.0.0").files) == [
        "component.yaml", "run.py"]
    (src / "component.yaml").write_text((src / "component.yaml").read_text().replace("1.0.0", "2.0.0"))
    done = inside.publish(src)  # with the registry now holding versions inside the code folder
    assert sorted(read_manifest(Path(done.location), "demo", "2.0.0").files) == ["component.yaml", "run.py"]
