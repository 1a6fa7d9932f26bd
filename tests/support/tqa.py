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


def held_agents_script() -> Script:
    """The agents' script, each model call taking 200 ms, and the Critic never satisfied by
    "Count the employees forever" taking 3 s a turn: such a conversation runs until it is
    cancelled, however loaded the machine (at 200 ms a call its 100 turns could end in
    `round_limit` within a test)."""
    script = yaml.safe_load(SCRIPT.read_text(encoding="utf-8"))
    never_satisfied = next(r for r in script["rules"] if r["name"] == "critic-never-satisfied")
    slowly = {
        "name": "critic-never-satisfied-slowly",
        "match": "(?s)^\\[autotqa:critic\\]\\nQuestion: Count the employees forever",
        "replies": [{"content": never_satisfied["reply"], "latency_ms": 3000}],
    }
    return Script.model_validate({**script, "latency_ms": 200, "rules": [slowly, *script["rules"]]})


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
