"""Secrets: environment and mapping stores, name rules, and redaction."""

from __future__ import annotations

import pytest

from dagwright.errors import DagwrightError
from dagwright.registry.services import Secrets
from dagwright.secrets import (
    EnvSecrets,
    MappingSecrets,
    Redactor,
    SecretNotFoundError,
    check_secret_name,
    redact,
)

# -- EnvSecrets ------------------------------------------------------------------------------


def test_env_secret_is_read_from_its_variable() -> None:
    env = {"DAGWRIGHT_SECRET_GITHUB_TOKEN": "ghp_abc123", "PATH": "/bin"}
    secrets = EnvSecrets(env)
    assert secrets.get("github_token") == "ghp_abc123"
    # Upper-cased, with '-' and '.' as '_': all these spellings are the same secret.
    assert secrets.get("GITHUB_TOKEN") == "ghp_abc123"
    assert secrets.get("github-token") == "ghp_abc123"
    assert secrets.get("github.token") == "ghp_abc123"
    assert EnvSecrets.variable("my.api-key") == "DAGWRIGHT_SECRET_MY_API_KEY"


def test_env_secrets_default_to_the_live_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    secrets = EnvSecrets()
    monkeypatch.setenv("DAGWRIGHT_SECRET_LATE_KEY", "set-after-creation")
    assert secrets.get("late_key") == "set-after-creation"
    assert "late_key" in secrets.names()


def test_missing_env_secret_says_how_to_set_it() -> None:
    with pytest.raises(SecretNotFoundError) as info:
        EnvSecrets({}).get("github_token")
    error = info.value
    assert isinstance(error, DagwrightError)
    assert error.code == "secret_not_found"
    assert error.name == "github_token"
    assert error.message == (
        "secret 'github_token' is not set: set the environment variable "
        "DAGWRIGHT_SECRET_GITHUB_TOKEN"
    )
    assert error.to_dict() == {"code": "secret_not_found", "message": error.message}


def test_empty_env_secret_is_not_a_value() -> None:
    secrets = EnvSecrets({"DAGWRIGHT_SECRET_EMPTY": ""})
    with pytest.raises(SecretNotFoundError) as info:
        secrets.get("empty")
    assert info.value.message == (
        "secret 'empty' is empty: the environment variable DAGWRIGHT_SECRET_EMPTY is ''"
    )
    assert secrets.names() == []


def test_env_names_lists_only_secrets_that_are_set() -> None:
    env = {
        "DAGWRIGHT_SECRET_B_KEY": "1",
        "DAGWRIGHT_SECRET_A_TOKEN": "2",
        "DAGWRIGHT_SECRET_": "no name",
        "DAGWRIGHT_SECRET_BLANK": "",
        "DAGWRIGHT_THREADS": "4",
        "HOME": "/root",
    }
    assert EnvSecrets(env).names() == ["a_token", "b_key"]
    assert EnvSecrets({}).names() == []


# -- MappingSecrets --------------------------------------------------------------------------


def test_mapping_secrets() -> None:
    secrets: Secrets = MappingSecrets({"b": "two", "a.key": "one"})
    assert secrets.get("a.key") == "one"
    assert secrets.names() == ["a.key", "b"]
    with pytest.raises(SecretNotFoundError) as info:
        secrets.get("c")
    assert info.value.message == "secret 'c' is not set: add it to the secrets the run is given"


def test_mapping_secrets_are_a_copy() -> None:
    values = {"k": "before"}
    secrets = MappingSecrets(values)
    values["k"] = "after"
    assert secrets.get("k") == "before"


# -- names -----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["a", "_x", "github_token", "A.b-c_9", "x" * 64])
def test_valid_secret_names(name: str) -> None:
    assert check_secret_name(name) == name


@pytest.mark.parametrize("name", ["", "9lives", "-x", ".x", "has space", "a/b", "x" * 65, "é"])
def test_invalid_secret_names(name: str) -> None:
    with pytest.raises(ValueError, match="is not a valid secret name") as info:
        check_secret_name(name)
    assert str(info.value).startswith(f"{name!r} is not a valid secret name: use up to 64")


def test_a_trailing_newline_is_not_a_valid_name() -> None:
    # `$` in the pattern matches before a final newline; the check must not.
    with pytest.raises(ValueError, match="is not a valid secret name"):
        check_secret_name("token\n")


def test_stores_check_names() -> None:
    with pytest.raises(ValueError, match="'a b' is not a valid secret name"):
        EnvSecrets({}).get("a b")
    with pytest.raises(ValueError, match="'a/b' is not a valid secret name"):
        MappingSecrets({"a/b": "x"})
    with pytest.raises(ValueError, match="'1x' is not a valid secret name"):
        MappingSecrets({}).get("1x")


# -- redact ----------------------------------------------------------------------------------


def test_redact_replaces_every_occurrence() -> None:
    text = "token=s3cr3t; again s3cr3t and key-42-key"
    assert redact(text, ["s3cr3t", "key-42-key"]) == "token=***; again *** and ***"


def test_redact_leaves_short_and_empty_values() -> None:
    # Replacing "abc" or "" everywhere would garble the text and hide nothing.
    assert redact("abc abcd", ["abc", "", "abcd"]) == "abc ***"
    assert redact("nothing to hide", []) == "nothing to hide"


def test_redact_prefers_the_longer_overlapping_secret() -> None:
    assert redact("xx-long-secret-xx", ["long", "long-secret"]) == "xx-***-xx"
    assert redact("xx-long-secret-xx", ["long-secret", "long"]) == "xx-***-xx"


def test_redact_treats_values_literally() -> None:
    assert redact("a.*b and a.*b!", ["a.*b"]) == "*** and ***!"
    assert redact("axxb", ["a.*b"]) == "axxb"


def test_redactor_is_reusable_and_says_whether_it_has_work() -> None:
    redactor = Redactor(["hunter2", "pw"])
    assert bool(redactor)
    assert redactor("my password is hunter2") == "my password is ***"
    assert redactor("hunter2hunter2") == "******"
    assert not Redactor(["pw", ""])
    assert Redactor([])("pw stays") == "pw stays"
