"""The one secret rule: which names are secret, and masking their values in text and argv."""

import doctest

import pytest

from distcomp.base import redact


@pytest.mark.parametrize("name", ["api_key", "DB_PASSWORD", "passwd", "db_pwd", "authToken", "basic_auth",
                                  "aws_credentials", "cred", "private_key_path", "client_secret", "GITHUB_TOKEN"])
def test_secret_names(name):
    assert redact.is_secret(name)


@pytest.mark.parametrize("name", ["epochs", "lr", "data", "model", "batch_size"])
def test_plain_names(name):
    assert not redact.is_secret(name)


def test_secret_values_are_those_of_secret_names_longest_first():
    values = {"password": "hunter2", "api_key": "hunter2-extended", "epochs": 3, "token": None, "auth": "ab"}
    assert redact.secret_values(values) == ["hunter2-extended", "hunter2", "ab"]


def test_mask_replaces_every_occurrence_and_short_values_as_words():
    """Through ``Masker.of_secrets``, what the ranks' own masking (``distcomp.runtime``) builds."""
    secrets = redact.secret_values({"password": "hunter2-extended", "db_pwd": "hunter2"})
    masker = redact.Masker.of_secrets(secrets)
    assert masker.text("a hunter2-extended b hunter2 c") == "a *** b *** c"
    assert masker.argv(["--pw", "x=hunter2", "--n", "2"]) == ["--pw", "x=***", "--n", "2"]
    # 1-2 characters: a word of its own is masked (before: never), the same letters in a word are not
    short = redact.Masker.of_secrets(["ab"])
    assert short.text("ab ab about lab --pw=ab 'ab'") == "*** *** about lab --pw=*** '***'"
    assert redact.Masker.of_secrets(["7"]).argv(["--pw", "7", "--n", "17"]) == ["--pw", "***", "--n", "17"]
    # the one way to mask is a Masker: the module-level helpers only tests used are gone (issue 35)
    assert not hasattr(redact, "mask") and not hasattr(redact, "mask_argv")


PEM = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\nBKcwggSjAgEAAoIBAQC7\n-----END PRIVATE KEY-----\n"
CREDS = '{\n  "type": "service_account",\n  "private_key_id": "8f1c2e",\n  "x": 1\n}'


def test_a_multi_line_secret_is_masked_whole_and_line_by_line():
    m = redact.Masker.of({"private_key": PEM, "gcp_credentials": CREDS})
    assert m.text(f"key={PEM}!") == "key=***!"
    for line in PEM.splitlines() + ["    MIIEvQIBADANBgkqhkiG9w0BAQEFAASC  ", '"private_key_id": "8f1c2e",']:
        assert "MII" not in m.text(line) and "BEGIN" not in m.text(line) and "8f1c2e" not in m.text(line), line
    # a line of punctuation only holds nothing of the secret: braces elsewhere stay
    assert m.text("{'a': {}}") == "{'a': {}}"
    assert m.text('"x": 1') == "***"  # a short line of the secret, as a line of its own
    # repr() of the secret (one line, \n escaped) shows none of its lines either
    assert "MII" not in m.text(repr(PEM)) and "END" not in m.text(repr(PEM))


def test_env_secrets_join_the_inputs():
    m = redact.Masker.of({"epochs": "3"}, env={"API_TOKEN": "tok-secret-1", "HOME": "/home/me"})
    assert m.text("API_TOKEN=tok-secret-1 HOME=/home/me epochs 3") == "API_TOKEN=*** HOME=/home/me epochs 3"
    assert not redact.Masker.of({"epochs": "3"}, env={"HOME": "/home/me"})


def test_a_masker_comes_back_from_its_needles():
    m = redact.Masker.of({"private_key": PEM, "pw": "x", "passwd": "ab"})
    assert redact.Masker(m.needles) == m and redact.Masker(tuple(reversed(m.needles))) == m
    text = f"{PEM} --passwd ab"
    assert "".join(p for p, _s in m.pieces(text)) == text
    assert [p for p, s in m.pieces(text) if s] == [PEM, "ab"]


def test_masker_data_and_raw_lines():
    m = redact.Masker.of({"token": "s3cr3t"})
    assert m.data({"a": ["x s3cr3t", 3, {"s3cr3t": "s3cr3t"}]}) == {"a": ["x ***", 3, {"s3cr3t": "***"}]}
    assert m.raw(b"\xff s3cr3t \xfe") == b"\xff *** \xfe" and m.raw(b"\xff plain") == b"\xff plain"


def test_doctests():
    assert doctest.testmod(redact).failed == 0


def test_tracking_uses_the_same_rule():
    from distcomp.tracking import job_params

    assert job_params({"auth_header": "Bearer abc", "db_credentials": "u:p", "epochs": 2}) == {
        "auth_header": "***", "db_credentials": "***", "epochs": "2"}


def test_a_bad_secret_input_is_named_not_shown(tmp_path):
    """Before: ``--input api_key=VALUE`` of the wrong type echoed VALUE in the one-line error."""
    from distcomp.spec import InputError, bind_inputs, load

    spec_file = tmp_path / "component.yaml"
    spec_file.write_text("name: sec\nversion: 0.1.0\ntype: DistributedComponent\n"
                         "inputs:\n  api_key: {type: Integer}\n  epochs: {type: Integer}\noutputs: {}\n"
                         "launcher:\n  type: torch.distributed\n  process_count_per_node: 1\n"
                         "  additional_arguments: python x.py --k {inputs.api_key} --e {inputs.epochs}\n")
    with pytest.raises(InputError) as err:
        bind_inputs(load(spec_file), {"api_key": "not-a-number-S3CRET", "epochs": "x1"})
    assert "S3CRET" not in str(err.value)
    assert "input 'api_key' must be an integer, got '***'" in str(err.value)
    assert "got 'x1'" in str(err.value)  # a plain input's value is still shown
