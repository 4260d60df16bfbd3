"""Version names, order and selection: checked against ``packaging`` itself."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from distcomp.registry import RegistryError, parse_reference
from distcomp.registry._versions import canonical, info, pick, sort_key, translate


@pytest.mark.parametrize(("given_", "folder"), [
    ("1.2.3", "1.2.3"), ("1", "1.0.0"), ("1.2", "1.2.0"), ("1.2.3.0", "1.2.3"), ("1.2.3.4", "1.2.3.4"),
    ("1.2.0.0.0", "1.2.0"), ("v1.0-RC1", "1.0.0rc1"), ("1.0a", "1.0.0a0"), ("1!2.0", "1!2.0.0"),
    ("1.0.post1", "1.0.0.post1"), ("1.0.dev3", "1.0.0.dev3"), ("1.0+Local.7", "1.0.0+local.7"), ("01.2.3", "1.2.3"),
])
def test_canonical_folder_names(given_: str, folder: str) -> None:
    assert canonical(given_) == folder
    assert Version(folder) == Version(given_)  # the same version, one spelling
    assert info(folder) is not None


@pytest.mark.parametrize("bad", ["latest", "1.2.x", "", "1..2", "../1.0.0"])
def test_invalid_versions_are_refused(bad: str) -> None:
    with pytest.raises(RegistryError, match=f"invalid version {bad!r}: expected a PEP 440 version such as 1.2.0"):
        canonical(bad)


@pytest.mark.parametrize("folder", ["1.2", "1.2.3.0", "01.2.3", ".staging", "1.0.0RC1", "v1.0.0", "notes"])
def test_entries_that_are_not_canonical_versions_are_ignored(folder: str) -> None:
    assert info(folder) is None


VERSION_TEXT = st.builds(
    lambda epoch, release, pre, post, dev, local: (
        (f"{epoch}!" if epoch else "") + ".".join(map(str, release)) + (f"{pre[0]}{pre[1]}" if pre else "")
        + (f".post{post}" if post is not None else "") + (f".dev{dev}" if dev is not None else "")
        + (f"+{local}" if local else "")),
    st.sampled_from([0, 0, 0, 1]),
    st.lists(st.integers(0, 12), min_size=1, max_size=5),
    st.none() | st.tuples(st.sampled_from(["a", "b", "rc"]), st.integers(0, 3)),
    st.none() | st.integers(0, 3),
    st.none() | st.integers(0, 3),
    st.none() | st.sampled_from(["1", "abc", "abc.2", "2.abc", "ubuntu.1"]),
)


@pytest.mark.slow
@settings(max_examples=400, deadline=None)
@given(st.lists(VERSION_TEXT, min_size=1, max_size=30))
def test_latest_is_packagings_highest(texts: list[str]) -> None:
    """Plain X.Y.Z folders are ordered by their numbers, the rest by packaging: a mix of both
    still gives packaging's highest."""
    folders = sorted({canonical(t) for t in texts})
    finals = [f for f in folders if not Version(f).is_prerelease]
    assert pick(folders, (), parse_reference("demo@latest")) == max(finals or folders, key=Version)
    assert sorted(folders, key=sort_key) == sorted(folders, key=Version)
    assert all(info(f)[1] == Version(f).is_prerelease for f in folders)  # type: ignore[index]


@pytest.mark.parametrize(("npm", "pep440"), [
    ("^1.2.3", ">=1.2.3,<2"), ("^1.2", ">=1.2,<2"), ("^1", ">=1,<2"), ("^0.2.3", ">=0.2.3,<0.3"),
    ("^0.2", ">=0.2,<0.3"), ("^0.0.3", ">=0.0.3,<0.0.4"), ("^0.0", ">=0.0,<0.1"), ("^0", ">=0,<1"),
    ("~1.2.3", ">=1.2.3,<1.3"), ("~1.2", ">=1.2,<1.3"), ("~1", ">=1,<2"), ("~0.2.3", ">=0.2.3,<0.3"),
    ("1.*", "==1.*"), ("1.2.*", "==1.2.*"), ("~=1.2", "~=1.2"), (">=1.0,<2", ">=1.0,<2"),
])
def test_npm_ranges_become_pep440(npm: str, pep440: str) -> None:
    assert translate(npm) == pep440


VERSIONS = ["0.9.0", "1.0.0", "1.2.0", "1.2.5", "1.3.0rc1", "1.10.0", "2.0.0rc1", "2.0.0", "2.1.0.dev1", "2.1.0",
            "3.0.0a1"]


@pytest.mark.parametrize(("selector", "skip", "expected"), [
    ("latest", (), "2.1.0"),  # not the 3.0.0a1 pre-release
    ("latest", ("2.1.0",), "2.0.0"),  # deprecated versions are skipped
    ("^1.2", (), "1.10.0"),  # numeric order: 1.10 > 1.2
    ("^1.2", ("1.10.0",), "1.2.5"),
    ("~1.2.0", (), "1.2.5"),
    ("~1.2", (), "1.2.5"),
    ("^0.9", (), "0.9.0"),
    (">=1.0,<2", (), "1.10.0"),  # 2.0.0rc1 is below 2 but a pre-release of it: PEP 440 leaves it out
    ("==1.*", (), "1.10.0"),
    ("1.2.*", (), "1.2.5"),
    ("~=1.2", (), "1.10.0"),
    (">=1.0,!=1.10.0,<2", (), "1.2.5"),  # the highest candidate fails: the next one is tried
    (">=1.3.0rc1,<1.4", (), "1.3.0rc1"),  # a range that names a pre-release allows it
    (">=2.2", (), "3.0.0a1"),  # no final release matches: pre-releases do
    (">=3", (), None),  # 3.0.0a1 comes before 3
    (">=2.1.0.dev0,<2.2", (), "2.1.0"),
    ("^4", (), None),
    ("^2", ("2.0.0", "2.1.0"), "2.1.0.dev1"),  # only pre-releases are left
    ("latest", tuple(VERSIONS), None),
])
def test_pick(selector: str, skip: tuple[str, ...], expected: str | None) -> None:
    ref = parse_reference(f"demo@{selector}")
    assert pick(VERSIONS, set(skip), ref) == expected


def test_pick_only_sees_canonical_folders() -> None:
    assert pick(["1.0.0", "9.9", ".staging", "x"], (), parse_reference("demo@latest")) == "1.0.0"


RANGES = [">=1.0,<2", "~=1.2", "==1.*", "!=2.0.0", ">1.0.0", "<=1.2.0", "<1.2", ">=0.5,!=1.0.*", "==2.0.0+abc",
          "^1.2", "~1.2.3", "^0.1", ">=1.0rc1,<2", "===1.0.0"]


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(st.lists(VERSION_TEXT, min_size=1, max_size=30), st.sampled_from(RANGES))
def test_ranges_pick_what_packaging_would(texts: list[str], selector: str) -> None:
    folders = sorted({canonical(t) for t in texts})
    ref = parse_reference(f"demo@{selector}")
    spec = SpecifierSet(ref.specifier or "")
    allow_pre = bool(spec.prereleases)
    matching = [f for f in folders if spec.contains(Version(f), prereleases=True)]
    finals = [f for f in matching if allow_pre or not Version(f).is_prerelease]
    expected = max(finals or matching, key=Version, default=None)
    assert pick(folders, (), ref) == expected
