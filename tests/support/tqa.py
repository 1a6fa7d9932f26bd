"""AutoTQA test support: the scripted model playing the agents (tqa_script.yaml: every answer
there is scripted, not a model's) and a server configured to use it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

from dagwright.llm.scripted.runner import ScriptedServer
from dagwright.llm.scripted.script import Script
from support.server import LiveServer, live_server

SCRIPT = Path(__file__).resolve().parent / "tqa_script.yaml"


def agents_script(**overrides: Any) -> Script:
    data = yaml.safe_load(SCRIPT.read_text(encoding="utf-8"))
    data.update(overrides)
    return Script.model_validate(data)


# A question whose conversation runs until it is cancelled: the script's Critic is never
# satisfied by it and takes 3 s a turn, so its 100 rounds outlast any test.
HELD_QUESTION = "Count the employees slowly, forever"


def provider_settings(base_url: str) -> str:
    """A dagwright.toml whose only provider is the scripted server at base_url."""
    return (
        'default_provider = "scripted"\n\n[providers.scripted]\n'
        f'base_url = "{base_url}"\ndefault_model = "scripted"\nscripted = true\n'
    )


@contextmanager
def tqa_server(
    database: str, data_dir: Path, script: Script | None = None, settings: str = ""
) -> Iterator[LiveServer]:
    """A live server whose models are the agents' scripted model (started here), with
    `settings` (top-level dagwright.toml lines) added to its settings file."""
    model = ScriptedServer(script or agents_script()).start()
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
        # The server reads ./dagwright.toml at start-up, and starts in its data directory.
        (data_dir / "dagwright.toml").write_text(settings + provider_settings(model.base_url))
        with live_server(database, data_dir) as running:
            yield running
    finally:
        model.stop()
