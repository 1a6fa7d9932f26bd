"""Model access for tests: a real scripted server on a loopback port, and a gateway to it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from dagwright.llm.gateway import LLMGateway
from dagwright.llm.providers import ProviderSettings, scripted_provider
from dagwright.llm.scripted.runner import ScriptedServer
from dagwright.llm.scripted.script import Script


@contextmanager
def scripted_server(script: dict[str, Any]) -> Iterator[ScriptedServer]:
    server = ScriptedServer(Script.model_validate(script)).start()
    try:
        yield server
    finally:
        server.stop()


def gateway_for(server: ScriptedServer, **provider: Any) -> LLMGateway:
    """A gateway whose default provider is the scripted server, with settings overridden."""
    config = scripted_provider(server.base_url).model_copy(update=provider)
    return LLMGateway(ProviderSettings().with_provider(config, default=True))
