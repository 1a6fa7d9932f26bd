"""Secrets: values blocks need (API keys, tokens) that must never be written into flow files,
events, outputs or logs. A flow names a secret; the run resolves the name through the
secrets service it was given (`registry.services.Secrets`, looked up as `SECRETS`).

Secrets come from environment variables (`EnvSecrets`, for `dagwright run`), from a dict
(`MappingSecrets`) or from the encrypted store in the database (services/secret_store.py).
`redact` removes secret values from any text before it is shown, so an error message that
echoes a request cannot leak one.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping

from dagwright.errors import DagwrightError

SECRET_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_.-]{0,63}$"
ENV_PREFIX = "DAGWRIGHT_SECRET_"
REDACTED = "***"
# Shorter values are not redacted: replacing every "ab" or "1" in a text would garble it
# while protecting nothing a guess could not find.
MIN_REDACTED_LENGTH = 4

_NAME = re.compile(SECRET_NAME_PATTERN)


class SecretNotFoundError(DagwrightError):
    """A flow names a secret that the run's secrets do not hold."""

    code = "secret_not_found"

    def __init__(self, name: str, message: str) -> None:
        super().__init__(message)
        self.name = name


def check_secret_name(name: str) -> str:
    """The name itself when it is a valid secret name, else ValueError."""
    # fullmatch: with `$`, re.match would accept a name ending in a newline.
    if not isinstance(name, str) or _NAME.fullmatch(name) is None:
        raise ValueError(
            f"{name!r} is not a valid secret name: use up to 64 letters, digits, '_', '.' "
            "or '-', starting with a letter or '_'"
        )
    return name


class EnvSecrets:
    """Secrets from environment variables: secret `github_token` is read from
    DAGWRIGHT_SECRET_GITHUB_TOKEN. Names are upper-cased and '-' and '.' become '_', so
    `github_token` and `GITHUB-TOKEN` are the same secret."""

    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        # The live os.environ unless told otherwise, so a variable set later is seen.
        self._environ: Mapping[str, str] = os.environ if environ is None else environ

    @staticmethod
    def variable(name: str) -> str:
        """The environment variable that holds a secret."""
        check_secret_name(name)
        return ENV_PREFIX + name.upper().replace("-", "_").replace(".", "_")

    def get(self, name: str) -> str:
        variable = self.variable(name)
        value = self._environ.get(variable)
        if value is None:
            raise SecretNotFoundError(
                name, f"secret {name!r} is not set: set the environment variable {variable}"
            )
        if not value:
            # An empty value is a mistake in the environment, not a usable credential.
            raise SecretNotFoundError(
                name, f"secret {name!r} is empty: the environment variable {variable} is ''"
            )
        return value

    def names(self) -> list[str]:
        # The variable's name cannot say whether '_' was '-' or '.': names come back in the
        # lower-case, underscore spelling, which resolves to the same variable.
        found = {
            variable[len(ENV_PREFIX) :].lower()
            for variable, value in self._environ.items()
            if variable.startswith(ENV_PREFIX) and value
        }
        return sorted(name for name in found if _NAME.fullmatch(name))


class MappingSecrets:
    """Secrets held in a dict: for tests, and for wiring secrets read from elsewhere."""

    def __init__(self, values: Mapping[str, str]) -> None:
        for name in values:
            check_secret_name(name)
        self._values = dict(values)

    def get(self, name: str) -> str:
        check_secret_name(name)
        try:
            return self._values[name]
        except KeyError:
            raise SecretNotFoundError(
                name, f"secret {name!r} is not set: add it to the secrets the run is given"
            ) from None

    def names(self) -> list[str]:
        return sorted(self._values)


class Redactor:
    """Replaces secret values (of at least 4 characters) by *** in any number of texts; the
    search pattern is built once."""

    __slots__ = ("_pattern",)

    def __init__(self, secrets: Iterable[str]) -> None:
        values = {value for value in secrets if len(value) >= MIN_REDACTED_LENGTH}
        self._pattern: re.Pattern[str] | None = None
        if values:
            # Longest first: where one secret contains another, the whole longer one goes.
            ordered = sorted(values, key=lambda value: (-len(value), value))
            self._pattern = re.compile("|".join(re.escape(value) for value in ordered))

    def __bool__(self) -> bool:
        """Whether there is anything to redact."""
        return self._pattern is not None

    def __call__(self, text: str) -> str:
        return text if self._pattern is None else self._pattern.sub(REDACTED, text)


def redact(text: str, secrets: Iterable[str]) -> str:
    """The text with every occurrence of any secret value (of at least 4 characters)
    replaced by ***."""
    return Redactor(secrets)(text)
