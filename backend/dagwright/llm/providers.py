"""Model providers: named connections to OpenAI-compatible endpoints.

Defined in the settings file (`DAGWRIGHT_SETTINGS`, else ./dagwright.toml; read by
settings.py):

    default_provider = "openai"

    [providers.openai]
    base_url = "https://api.openai.com/v1"
    api_key_env = "OPENAI_API_KEY"       # the key stays in the environment...
    # api_key_secret = "openai_key"      # ...or in the secret store; never in this file
    default_model = "gpt-4o-mini"
    timeout = 60                         # seconds per attempt
    max_concurrency = 8                  # calls in flight at once, across all runs
    max_attempts = 3                     # 1 try + 2 retries on 429, 5xx, timeouts, disconnects
    price_input_per_1k = 0.00015         # money per 1,000 prompt tokens
    price_output_per_1k = 0.0006

    [providers.azure]
    kind = "azure"
    base_url = "https://my-resource.openai.azure.com"
    api_version = "2024-10-21"
    api_key_env = "AZURE_OPENAI_API_KEY"
    default_model = "my-gpt4o-deployment"

vLLM, Ollama (base_url "http://localhost:11434/v1") and LM Studio are `kind = "openai"` with
their base URL; a key is optional for them. With no settings file, OPENAI_API_KEY in the
environment configures OpenAI (`Settings.model_providers`); with neither, callers fall back
to the scripted model.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from dagwright.errors import DagwrightError

SCRIPTED = "scripted"


class UnknownProviderError(DagwrightError):
    code = "unknown_provider"


class ProviderConfig(BaseModel):
    """One model connection. Holds where the key is, never the key itself."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_.-]{0,63}$")
    kind: Literal["openai", "azure"] = "openai"
    base_url: str | None = Field(None, description="None: the openai library's default")
    api_version: str | None = Field(None, description="Azure OpenAI only")
    api_key_env: str | None = None
    api_key_secret: str | None = None
    default_model: str = "gpt-4o-mini"
    timeout: float = Field(60.0, gt=0, le=3600)
    max_concurrency: int = Field(8, ge=1, le=10_000)
    # A call's worst case with these defaults, 3 attempts x 60 s + 2 waits of at most 10 s
    # (Retry-After included) = 200 s, fits the 300 s deadline of a published run
    # (DAGWRIGHT_RUN_TIMEOUT): the run fails on the call's own error, not its deadline.
    max_attempts: int = Field(3, ge=1, le=20)
    backoff_base: float = Field(0.5, ge=0, description="seconds; doubles each retry, jittered")
    backoff_max: float = Field(10.0, ge=0)
    price_input_per_1k: float = Field(0.0, ge=0)
    price_output_per_1k: float = Field(0.0, ge=0)
    scripted: bool = Field(
        False, description="the project's scripted model: answers are not a model's"
    )

    @model_validator(mode="after")
    def _azure_needs_endpoint(self) -> ProviderConfig:
        if self.kind == "azure" and not (self.base_url and self.api_version):
            raise ValueError("an azure provider needs base_url (its endpoint) and api_version")
        if self.api_key_env and self.api_key_secret:
            raise ValueError("give api_key_env or api_key_secret, not both")
        return self

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        return (
            prompt_tokens * self.price_input_per_1k + completion_tokens * self.price_output_per_1k
        ) / 1000


class ProviderSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    default_provider: str | None = None
    providers: dict[str, ProviderConfig] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _names_from_keys(cls, data: object) -> object:
        # In TOML a provider's name is its table key; fill it in so it is not written twice.
        if isinstance(data, dict) and isinstance(data.get("providers"), dict):
            data = dict(data)
            data["providers"] = {
                key: {"name": key, **value} if isinstance(value, dict) else value
                for key, value in data["providers"].items()
            }
        return data

    @model_validator(mode="after")
    def _default_exists(self) -> ProviderSettings:
        if self.default_provider and self.default_provider not in self.providers:
            raise ValueError(f"default_provider {self.default_provider!r} is not defined")
        return self

    @property
    def is_empty(self) -> bool:
        return not self.providers

    def get(self, name: str | None) -> ProviderConfig:
        """A provider by name; None means the default one."""
        if name is None:
            name = self.default_provider or next(iter(self.providers), None)
            if name is None:
                raise UnknownProviderError("no model provider is configured")
        try:
            return self.providers[name]
        except KeyError:
            known = ", ".join(self.providers) or "none"
            raise UnknownProviderError(f"unknown provider {name!r} (configured: {known})") from None

    def with_provider(self, provider: ProviderConfig, default: bool = False) -> ProviderSettings:
        providers = {**self.providers, provider.name: provider}
        chosen = provider.name if default else self.default_provider
        return ProviderSettings(default_provider=chosen, providers=providers)


def scripted_provider(base_url: str, max_concurrency: int = 64) -> ProviderConfig:
    """The project's scripted model server as a provider (tests and the offline demo)."""
    return ProviderConfig(
        name=SCRIPTED,
        base_url=base_url,
        default_model=SCRIPTED,
        timeout=30,
        max_concurrency=max_concurrency,
        scripted=True,
    )
