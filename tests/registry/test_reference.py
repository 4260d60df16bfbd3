"""``NAME@SELECTOR`` references and the names the registry accepts."""

from __future__ import annotations

import pytest

from distcomp.registry import Reference, RegistryError, parse_reference
from distcomp.registry._reference import looks_like_reference
from tests.registry.conftest import refused


@pytest.mark.parametrize(("text", "expected"), [
    ("demo@1.2.0", Reference("demo", "1.2.0", "exact", version="1.2.0")),
    ("demo@1.2", Reference("demo", "1.2", "exact", version="1.2.0")),
    ("demo@v2.0-rc.1", Reference("demo", "v2.0-rc.1", "exact", version="2.0.0rc1")),
    ("demo@latest", Reference("demo", "latest", "latest")),
    ("pytorch-ddp_train.v2@^1.2", Reference("pytorch-ddp_train.v2", "^1.2", "range", specifier=">=1.2,<2")),
    ("demo@~1.2.3", Reference("demo", "~1.2.3", "range", specifier=">=1.2.3,<1.3")),
    ("demo@>=1.0, <2", Reference("demo", ">=1.0,<2", "range", specifier=">=1.0,<2")),
    ("demo@1.*", Reference("demo", "1.*", "range", specifier="==1.*")),
    ("demo@~=1.4", Reference("demo", "~=1.4", "range", specifier="~=1.4")),
])
def test_parse(text: str, expected: Reference) -> None:
    assert parse_reference(text) == expected
    assert str(expected) == f"{expected.name}@{expected.selector}"


def test_a_bare_name_takes_the_default() -> None:
    assert parse_reference("demo", default="latest") == Reference("demo", "latest", "latest")
    with pytest.raises(RegistryError, match="'demo' is not a reference: expected NAME@VERSION"):
        parse_reference("demo")


NAME_RULE = ("registry names are 1-100 lowercase letters, digits, '.', '_' or '-', starting with a letter or digit")


@pytest.mark.parametrize(("text", "message"), [
    ("../etc@1.0.0", f"'../etc@1.0.0': invalid component name '../etc': {NAME_RULE}"),
    ("/abs/path@1.0.0", f"'/abs/path@1.0.0': invalid component name '/abs/path': {NAME_RULE}"),
    ("a/b@1.0.0", f"'a/b@1.0.0': invalid component name 'a/b': {NAME_RULE}"),
    (".hidden@1.0.0", f"'.hidden@1.0.0': invalid component name '.hidden': {NAME_RULE}"),
    ("@1.0.0", f"'@1.0.0': invalid component name '': {NAME_RULE}"),
    ("Demo@1.0.0", f"'Demo@1.0.0': invalid component name 'Demo': {NAME_RULE}; did you mean 'demo'?"),
    ("x" * 101 + "@1", f"'{'x' * 101}@1': invalid component name '{'x' * 101}': {NAME_RULE}"),
    ("demo@", "'demo@' has no version after '@': expected an exact version (1.2.0), latest, ^1.2, ~1.2.3, 1.*, or "
              "a PEP 440 range such as '>=1.0,<2'"),
    ("demo@^x", "invalid version selector '^x' in 'demo@^x': ^ takes a release such as ^1.2 or ^1.2.3 (digits only)"),
    ("demo@~1.2.3-beta", "invalid version selector '~1.2.3-beta' in 'demo@~1.2.3-beta': ~ takes a release such as "
                         "~1.2 or ~1.2.3 (digits only)"),
    ("demo@>=", "invalid version selector '>=' in 'demo@>=': expected an exact version (1.2.0), latest, ^1.2, "
                "~1.2.3, 1.*, or a PEP 440 range such as '>=1.0,<2'"),
    ("demo@../../x", "invalid version selector '../../x' in 'demo@../../x': expected an exact version (1.2.0), "
                     "latest, ^1.2, ~1.2.3, 1.*, or a PEP 440 range such as '>=1.0,<2'"),
])
def test_bad_references_say_what_is_expected(text: str, message: str) -> None:
    assert refused(lambda: parse_reference(text)) == message


@pytest.mark.parametrize(("text", "meant"), [
    ("demo@1.0.0", True), ("Demo@latest", True), ("demo@^x", True), ("components/demo", False),
    ("./demo@1.0.0", False), ("dir/demo@1.0.0", False), ("component.yaml", False), ("@1.0", False),
])
def test_what_looks_like_a_reference(text: str, meant: bool) -> None:
    assert looks_like_reference(text) is meant
