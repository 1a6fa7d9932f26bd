"""Settings for tests that build them (settings.py): from the test's values and the defaults
only, not from the developer's environment or a dagwright.toml where the tests run."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# What the settings read besides DAGWRIGHT_*: the OpenAI and OpenTelemetry variables.
SETTINGS_PREFIXES = ("DAGWRIGHT_", "OPENAI_", "OTEL_")


def clean_settings_environment(monkeypatch: pytest.MonkeyPatch, cwd: Path) -> None:
    """No variable the settings read, and `cwd` (without ./dagwright.toml) as the working
    directory, until the test ends."""
    for name in list(os.environ):
        if name.startswith(SETTINGS_PREFIXES):
            monkeypatch.delenv(name)
    monkeypatch.chdir(cwd)
