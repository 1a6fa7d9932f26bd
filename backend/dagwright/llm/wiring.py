"""Putting model access together for a process: the configured providers, or — when none is
configured, or a recording is replayed — the project's scripted model server, clearly
announced as such."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from dagwright.llm.gateway import LLMGateway
from dagwright.llm.providers import (
    ProviderSettings,
    scripted_provider,
)
from dagwright.llm.recording import Recorder
from dagwright.llm.scripted.replay import script_from_recording
from dagwright.llm.scripted.runner import ScriptedServer
from dagwright.llm.scripted.script import Script, default_script
from dagwright.registry.services import Secrets
from dagwright.secrets import EnvSecrets


def redirect_to(settings: ProviderSettings, base_url: str) -> ProviderSettings:
    """Every configured provider, answered by the scripted server at base_url instead (names
    and default models kept, so flows and recordings still line up)."""
    if settings.is_empty:
        return ProviderSettings().with_provider(scripted_provider(base_url), default=True)
    providers = {
        name: provider.model_copy(
            update={
                "kind": "openai",
                "base_url": base_url,
                "api_version": None,
                "api_key_env": None,
                "api_key_secret": None,
                "scripted": True,
            }
        )
        for name, provider in settings.providers.items()
    }
    return ProviderSettings(default_provider=settings.default_provider, providers=providers)


@contextmanager
def model_access(
    settings: ProviderSettings,
    *,
    record: Path | None = None,
    replay: Path | None = None,
    secrets: Secrets | None = None,
    notice: Callable[[str], None] = print,
) -> Iterator[LLMGateway]:
    """A gateway for this process. Call `await gateway.aclose()` on the loop that used it."""
    script: Script | None = None
    if replay is not None:
        script = script_from_recording(replay)
        notice(f"replaying model answers from {replay} (scripted, not a model's)")
    elif settings.is_empty:
        script = default_script()
        notice(
            "no model provider is configured: dagwright's scripted model answers "
            "(its answers are scripted, not a model's; see dagwright.toml in the README)"
        )
    server = ScriptedServer(script).start() if script is not None else None
    try:
        if server is not None:
            settings = redirect_to(settings, server.base_url)
        recorder = Recorder(record) if record is not None else None
        yield LLMGateway(
            settings,
            secrets=secrets or EnvSecrets(),
            recorder=recorder,
            plays_default_script=replay is None and script is not None,
        )
    finally:
        if server is not None:
            server.stop()
