"""The one secret rule: which names are secret, and masking their values in text and argv."""

import doctest

import pytest

from distcomp import redact


@pytest.mark.parametrize("name", ["api_key", "DB_PASSWORD", "passwd", "db_pwd", "authToken", "basic_auth",
                                  "aws_credentials", "cred", "private_key_path", "client_secret", "GITHUB_TOKEN"])
def test_secret_names(name):
    assert redact.is_secret(name)


@pytest.mark.parametrize("name", ["epochs", "lr", "data", "model", "batch_size"])
def test_plain_names(name):
    assert not redact.is_secret(name)


def test_secret_values_are_those_of_secret_names_longest_first():
    values = {"password": "hunter2", "api_key": "hunter2-extended", "epochs": 3, "token": None, "auth": "ab"}
    assert redact.secret_values(values) == ["hunter2-extended", "hunter2"]


def test_mask_replaces_every_occurrence_and_keeps_short_values():
    secrets = redact.secret_values({"password": "hunter2-extended", "db_pwd": "hunter2"})
    assert redact.mask("a hunter2-extended b hunter2 c", secrets) == "a *** b *** c"
    assert redact.mask_argv(["--pw", "x=hunter2", "--n", "2"], secrets) == ["--pw", "x=***", "--n", "2"]
    assert redact.mask("ab ab", ["ab"]) == "ab ab"


def test_doctests():
    assert doctest.testmod(redact).failed == 0


def test_tracking_uses_the_same_rule():
    from distcomp.tracking import job_params

    assert job_params({"auth_header": "Bearer abc", "db_credentials": "u:p", "epochs": 2}) == {
        "auth_header": "***", "db_credentials": "***", "epochs": "2"}
