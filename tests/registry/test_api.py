"""``distcomp.registry.publish|components|search|show|deprecate`` called directly: the records
``distcomp registry ACTION`` prints (test_cli.py runs the commands)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

import distcomp
from distcomp.registry import (
    Deprecation, Listing, PublishFailure, PublishReport, Published, RegistryError, Skipped, VersionDetails, VersionInfo,
)
from tests.conftest import REPO
from tests.registry.conftest import Make

COMPONENTS = ("deepspeed-train", "mpi-allreduce-bench", "pytorch-ddp-train", "tf-multiworker-train")


@pytest.fixture
def where(tmp_path: Path) -> str:
    return str(tmp_path / "registry")


def test_publish_a_pattern_skips_what_is_no_spec_and_reports_each(where: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    heard: list[object] = []
    report = distcomp.registry.publish("components/*", registry=where, progress=heard.append)
    assert isinstance(report, PublishReport) and report.ok and report.exit_code == 0 and report.location == where
    assert report.results[0] == Skipped("components/README.md", "not a spec file (.yaml) or a component folder")
    assert [(p.name, p.version, p.created) for p in report.published] == [(n, "1.0.0", True) for n in COMPONENTS]
    assert heard == list(report.results)  # each as it was known
    stored = distcomp.registry.show("pytorch-ddp-train@1.0.0", registry=where)
    assert report.published[2].sha256 == stored.sha256
    again = distcomp.registry.publish(Path("components") / "pytorch-ddp-train", registry=where)
    assert [p.created for p in again.published] == [False]
    with pytest.raises(dataclasses.FrozenInstanceError):
        report.location = "x"  # type: ignore[misc]


def test_a_refused_spec_is_a_failure_and_the_others_still_publish(where: str, make: Make, tmp_path: Path) -> None:
    first, other, fine = make(body="a\n"), make(body="b\n"), make(name="fine")
    assert distcomp.registry.publish(first, registry=where).ok
    report = distcomp.registry.publish(other, fine, registry=where)
    assert (report.ok, report.exit_code) == (False, 2)
    (failure,) = report.failures
    assert isinstance(failure, PublishFailure) and failure.spec == str(other)
    assert failure.message.startswith("demo@1.0.0 is already published with different content")
    assert isinstance(report.results[1], Published) and report.results[1].name == "fine"
    (tmp_path / "empty").mkdir()
    with pytest.raises(RegistryError, match="empty: no component.yaml in this folder"):
        distcomp.registry.publish(tmp_path / "empty", registry=where)
    with pytest.raises(RegistryError, match="nothing-here-\\*: matches no file or folder"):
        distcomp.registry.publish(str(tmp_path / "nothing-here-*"), registry=where)


def test_components_search_show_and_deprecate(where: str, make: Make) -> None:
    empty = distcomp.registry.components(registry=where)
    assert empty == Listing(where, (), "")
    distcomp.registry.publish(make(), make(name="other", version="2.1", description="Keras job."), registry=where)
    listed = distcomp.registry.components(registry=where)
    assert [(s.name, s.version, s.versions, s.deprecated) for s in listed.components] == [
        ("demo", "1.0.0", 1, 0), ("other", "2.1.0", 1, 0)]
    assert listed.as_json()[0]["latest"] == "1.0.0"
    found = distcomp.registry.search("KERAS", registry=where)
    assert ([s.name for s in found.components], found.query) == (["other"], "KERAS")

    shown = distcomp.registry.show("demo", registry=where)
    assert isinstance(shown, VersionDetails)
    assert (shown.ref, shown.deprecated, shown.files, shown.versions) == ("demo@1.0.0", None, 2,
                                                                           (VersionInfo("1.0.0"),))
    assert shown.spec == Path(where) / "demo" / "1.0.0" / "component.yaml"
    assert (shown.about["launcher"], shown.about["display_name"]) == ("torch.distributed", "Demo job")
    assert shown.as_json()["inputs"]["steps"]["default"] == 1

    done = distcomp.registry.deprecate("demo@1.0.0", "use other", registry=where)
    assert done == Deprecation("demo", "1.0.0", "use other", False, None) and done.changed
    assert distcomp.registry.show("demo@1.0.0", registry=where).deprecated == "demo@1.0.0 is deprecated: use other"
    undone = distcomp.registry.deprecate("demo@1.0.0", undo=True, registry=where)
    assert (undone.was, undone.changed) == ("use other", True)
    assert not distcomp.registry.deprecate("demo@1.0.0", undo=True, registry=where).changed
    with pytest.raises(RegistryError, match="deprecate takes an exact version"):
        distcomp.registry.deprecate("demo@latest", registry=where)
