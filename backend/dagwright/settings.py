"""The process's settings: every DAGWRIGHT_* variable and the settings file (dagwright.toml),
read once, typed and checked, by `load_settings()`. Nothing else in dagwright reads its
configuration from the environment: the composition root (composition.py) hands each service
the part of these settings it needs. (Secret values are not settings: `EnvSecrets` reads
DAGWRIGHT_SECRET_<NAME> when a run asks for one.)

A value comes from, in this order: the environment (`DAGWRIGHT_PORT=9000`), then the
settings file (`port = 9000` at its top level), then the default below. The settings file is
the one DAGWRIGHT_SETTINGS names, else ./dagwright.toml when there is one; it also holds the
model providers (`[providers.<name>]`, `default_provider`) and the data sources
(`[sources.<name>]`). A bad value fails the start with `SettingsError`, naming the variable
(or the file's key) and what is wrong with it.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from pathlib import Path
from types import UnionType
from typing import Any, Final, Literal, Union, get_args, get_origin

from pydantic import AliasChoices, Field, ValidationError, field_validator
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from dagwright.errors import DagwrightError, describe_validation_error
from dagwright.llm.providers import ProviderConfig, ProviderSettings

ENV_PREFIX: Final = "DAGWRIGHT_"
SETTINGS_FILE_ENV: Final = "DAGWRIGHT_SETTINGS"
DEFAULT_SETTINGS_FILE: Final = "dagwright.toml"
_TRUE: Final = frozenset({"1", "true", "yes", "on"})


class SettingsError(DagwrightError):
    """A setting (an environment variable or a key of the settings file) is not valid."""

    code = "invalid_settings"


def _paths(value: str | None) -> list[Path] | None:
    if value is None:
        return None
    return [Path(part).expanduser() for part in value.split(os.pathsep) if part.strip()]


class Settings(BaseSettings):
    """Everything a dagwright process is configured with. Built by `load_settings()`; tests
    build one directly (`Settings(data_dir=tmp_path)`)."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, extra="forbid", frozen=True, populate_by_name=True
    )

    # -- where things are ------------------------------------------------------------------
    data_dir: Path = Field(Path("data"), description="the data directory")
    database_url: str | None = Field(None, description="None: SQLite in the data directory")
    settings_file: Path | None = Field(
        None,
        validation_alias=AliasChoices(SETTINGS_FILE_ENV, "settings_file"),
        description="the settings file read (DAGWRIGHT_SETTINGS, else ./dagwright.toml)",
    )
    blocks_path: str = Field("", description="block folders, os.pathsep-separated")
    secret_key: str | None = Field(None, description="the secret store's master key")

    # -- the server ------------------------------------------------------------------------
    host: str = "127.0.0.1"
    port: int = Field(8000, ge=0, le=65535)
    admin_token: str | None = None
    cors_origins: str = Field("", description="allowed origins, comma-separated")
    # Checked by the server (api/settings.py), which refuses to start on a bad one.
    rate_limit: float = Field(100.0, description="requests per second per API key")
    replica: str = Field(default_factory=socket.gethostname)
    max_body_bytes: int = Field(2 * 1024 * 1024, gt=0)
    run_timeout: float = Field(300.0, description="a published run's deadline, seconds")
    # What every retry in one run may cost together, seconds (registry/budget.py).
    retry_budget: float = Field(60.0, gt=0, description="a run's retries together, seconds")
    # Where run traces are posted (OTLP/HTTP): DAGWRIGHT_OTLP_ENDPOINT or the OpenTelemetry
    # variables (the base endpoint gets the conventional /v1/traces).
    otlp_endpoint: str | None = Field(
        None,
        validation_alias=AliasChoices(
            "DAGWRIGHT_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "otlp_endpoint"
        ),
    )
    otlp_base_endpoint: str | None = Field(
        None, validation_alias=AliasChoices("OTEL_EXPORTER_OTLP_ENDPOINT", "otlp_base_endpoint")
    )

    # -- runs ------------------------------------------------------------------------------
    threads: int = Field(128, ge=1, description="threads for blocking blocks")
    # The heavy-work pools (dagwright/workpools.py): bounded, a call past the queue is a 429.
    data_threads: int = Field(4, ge=1, description="threads for table work (queries, samples)")
    data_queue_max: int = Field(32, ge=0, description="table calls waiting beyond which: 429")
    evaluation_threads: int = Field(2, ge=1, description="threads for evaluations' scoring")
    evaluation_queue_max: int = Field(8, ge=0, description="scorings waiting beyond which: 429")
    evaluation_max_concurrency: int = Field(
        8, ge=1, description="examples one in-process evaluation runs at once, at most"
    )
    api_threads: int = Field(8, ge=1, description="threads for the API's blocking calls")
    pool_retry_after: float = Field(2.0, gt=0, description="Retry-After of a full pool's 429")

    # -- queue mode (services/queue, docs/deploy.md) ----------------------------------------
    queue: Literal["", "procrastinate"] = Field(
        "", description="'procrastinate': async runs go to `dagwright worker` processes"
    )
    worker_concurrency: int = Field(16, ge=1, description="runs one worker executes at once")
    queue_max_depth: int = Field(10_000, ge=1, description="queued runs beyond which: 429")
    queue_app_limit: int = Field(1_000, ge=1, description="an app's queue runs beyond which: 429")
    worker_heartbeat: float = Field(2.0, gt=0, description="seconds between heartbeats")
    worker_stalled_after: float = Field(
        15.0, gt=0, description="seconds of silence after which a worker is dead"
    )
    worker_alive_file: Path | None = Field(None, description="touched every heartbeat")
    worker_shutdown_grace: float = Field(
        30.0,
        ge=0,
        description="after SIGTERM, seconds a worker's runs may take to finish before it hands "
        "them back to the queue, for another worker to resume",
    )
    worker_poll_interval: float = Field(
        1.0, gt=0, description="seconds between an idle worker's looks for jobs freed"
    )
    queue_evaluation_chunk: int = Field(
        10, ge=1, description="examples per job of a queued evaluation"
    )

    # -- webhooks (services/triggers.py, docs/security/webhooks.md) ------------------------
    webhook_tolerance: float = Field(
        300.0,
        gt=0,
        description="seconds a webhook's signed timestamp may differ from the server's clock; "
        "older (or later) calls are refused 401, and a signature is remembered this long",
    )
    webhook_rate_limit: int = Field(
        60, ge=1, description="firings of one webhook per minute beyond which: 429"
    )

    # -- AutoTQA (tqa/admission.py) ---------------------------------------------------------
    tqa_max_conversations: int = Field(
        64,
        ge=1,
        description="AutoTQA conversations running (or queued) at once, over every replica, "
        "beyond which a new one is refused with 429 `conversations_full`",
    )

    # -- models ----------------------------------------------------------------------------
    default_model: str = "gpt-4o-mini"
    default_provider: str | None = None
    providers: dict[str, ProviderConfig] = Field(default_factory=dict)
    # Without a settings file, OPENAI_API_KEY configures OpenAI (the openai library's names).
    openai_api_key: str | None = Field(
        None, validation_alias=AliasChoices("OPENAI_API_KEY", "openai_api_key"), repr=False
    )
    openai_base_url: str | None = Field(
        None, validation_alias=AliasChoices("OPENAI_BASE_URL", "openai_base_url")
    )

    # -- examples (Qdrant) -----------------------------------------------------------------
    qdrant_url: str | None = None
    qdrant_api_key: str | None = Field(None, repr=False)

    # -- data sources ----------------------------------------------------------------------
    sources: dict[str, dict[str, Any]] = Field(default_factory=dict)
    demo_sources: bool = True
    source_roots: str | None = Field(None, description="os.pathsep-separated; None: defaults")
    process_memory: str | None = None
    query_memory: str | None = None
    query_threads: int | None = Field(None, ge=1)
    query_temp_dir: str | None = None
    query_temp_size: str | None = None
    # The stored table catalogue (docs/data.md, "The catalogue"): a source re-listed past
    # catalogue_check_s, a table without a change stamp (databases) re-read past
    # catalogue_ttl_s, catalogue_sample_rows rows read per table for its values.
    catalogue_check_s: float = Field(60.0, ge=0)
    catalogue_ttl_s: float = Field(3600.0, ge=0)
    catalogue_sample_rows: int = Field(20, ge=0, le=1000)
    # The embedder whose vectors index the catalogue beside the words (e.g. "minilm";
    # empty: lexical index only): a question then also finds tables by meaning.
    catalogue_embedder: str | None = None
    sandbox_bwrap: str = ""
    sandbox_allow_unisolated: bool = False
    # The host-wide sandbox budget (docs/security/sandbox.md); 0: derived from the machine.
    sandbox_max_concurrent: int = Field(0, ge=0)
    sandbox_memory_budget_mb: int = Field(0, ge=0)
    sandbox_max_call_mb: int = Field(0, ge=0)
    sandbox_queue_wait_s: float = Field(5.0, ge=0, le=120)
    sandbox_queue_max: int = Field(0, ge=0)
    sandbox_budget_dir: str = ""
    sandbox_cgroup: bool = True

    # -- charts (charts/renderer.py, docs/security/charts.md) ------------------------------
    charts_concurrency: int = Field(
        2, ge=1, description="chart renders at once (each a child process); more: 429"
    )
    charts_timeout: float = Field(10.0, gt=0, description="seconds before a render is killed")
    charts_memory_mb: int = Field(
        1024, ge=640, description="a render's memory (RLIMIT_DATA; V8 needs 640 MB to start)"
    )
    charts_max_rows: int = Field(50_000, ge=1, description="data rows a rendered chart may hold")

    # -- tools -----------------------------------------------------------------------------
    mcp_stdio_commands: str = Field("", description="executables, comma-separated")
    # Outbound targets flow authors may reach beyond public addresses (dagwright/egress.py).
    egress_allow: str = Field("", description="hosts, host:port, addresses, CIDRs; commas")

    @field_validator("sandbox_allow_unisolated", mode="before")
    @classmethod
    def _lenient_flag(cls, value: object) -> object:
        # As before the settings object: anything but a "true" word leaves isolation on.
        if isinstance(value, str):
            return value.strip().lower() in _TRUE
        return value

    @field_validator("egress_allow")
    @classmethod
    def _egress_rules(cls, value: str) -> str:
        from dagwright.egress import parse_allow_list

        parse_allow_list(value)  # a bad entry stops the start, naming the variable
        return value

    @field_validator("demo_sources", mode="before")
    @classmethod
    def _demo_unless_zero(cls, value: object) -> object:
        # As before the settings object: only "0" leaves the demo sources out.
        if isinstance(value, str):
            return value.strip() != "0"
        return value

    @field_validator(
        "database_url",
        "secret_key",
        "admin_token",
        "otlp_endpoint",
        "otlp_base_endpoint",
        "openai_api_key",
        "openai_base_url",
        "qdrant_url",
        "qdrant_api_key",
        "process_memory",
        "query_memory",
        "query_temp_dir",
        "query_temp_size",
        mode="before",
    )
    @classmethod
    def _empty_is_unset(cls, value: object) -> object:
        return None if isinstance(value, str) and not value.strip() else value

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings, env_settings)

    # -- derived values --------------------------------------------------------------------

    @property
    def block_folders(self) -> list[Path]:
        return _paths(self.blocks_path) or []

    @property
    def source_root_folders(self) -> list[Path] | None:
        """The folders sources may read; None: the defaults (<data dir>/sources, /billing)."""
        return _paths(self.source_roots)

    @property
    def traces_endpoint(self) -> str | None:
        """The OTLP/HTTP URL run traces are posted to; None: runs are not traced."""
        if self.otlp_endpoint:
            return self.otlp_endpoint
        base = self.otlp_base_endpoint
        return f"{base.rstrip('/')}/v1/traces" if base else None

    @property
    def cors_origin_list(self) -> list[str]:
        return [origin.strip() for origin in self.cors_origins.split(",") if origin.strip()]

    @property
    def stdio_commands(self) -> frozenset[str]:
        return frozenset(c.strip() for c in self.mcp_stdio_commands.split(",") if c.strip())

    def model_providers(self) -> ProviderSettings:
        """The providers of the settings file; else OpenAI when OPENAI_API_KEY is set; else
        none (callers use the scripted model)."""
        if self.providers or self.default_provider:
            return ProviderSettings(
                default_provider=self.default_provider, providers=self.providers
            )
        if self.openai_api_key:
            openai = ProviderConfig(
                name="openai",
                base_url=self.openai_base_url,
                api_key_env="OPENAI_API_KEY",
                default_model=self.default_model,
            )
            return ProviderSettings(default_provider="openai", providers={"openai": openai})
        return ProviderSettings()


def settings_file_path(environ: dict[str, str] | None = None) -> Path | None:
    """DAGWRIGHT_SETTINGS, else ./dagwright.toml when there is one, else None."""
    named = (os.environ if environ is None else environ).get(SETTINGS_FILE_ENV)
    if named:
        return Path(named)
    default = Path(DEFAULT_SETTINGS_FILE)
    return default if default.is_file() else None


def _read_file(path: Path) -> dict[str, Any]:
    import tomllib  # only when there is a settings file: most runs have none

    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise SettingsError(f"{path}: cannot read: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise SettingsError(f"{path}: not valid TOML: {exc}") from None
    if "providers" in data:
        try:
            # Checked as a whole here: the provider's name is its table's key.
            checked = ProviderSettings.model_validate(
                {"providers": data["providers"], "default_provider": data.get("default_provider")}
            )
        except ValidationError as exc:
            raise SettingsError(f"{path}: {describe_validation_error(exc)}") from None
        data["providers"] = checked.providers
    sources = data.get("sources", {})
    if not isinstance(sources, dict) or not all(isinstance(v, dict) for v in sources.values()):
        raise SettingsError(f"{path}: [sources.<name>] must be tables")
    return data


def _variables(name: str, info: FieldInfo) -> list[str]:
    """The environment variables a setting is read from, first the one errors name."""
    alias = info.validation_alias
    if isinstance(alias, AliasChoices):
        names = [choice for choice in alias.choices if isinstance(choice, str) and choice != name]
        if names:
            return names
    return [ENV_PREFIX + name.upper()]


def _set_in(environ: Mapping[str, str], names: list[str]) -> str | None:
    """The first of the variables set (matched without case, as pydantic-settings reads them)."""
    present = {key.upper(): key for key in environ}
    for name in names:
        if name.upper() in present:
            return present[name.upper()]
    return None


_SHOWABLE: Final = (bool, int, float, Path, type(None))


def _shows_value(info: FieldInfo) -> bool:
    """Whether an error may quote the value given: numbers, flags, paths and fixed choices
    carry no secret; free text and tables may (a source's URL holds its password)."""
    annotation = info.annotation
    if get_origin(annotation) is Literal:
        return True
    if isinstance(annotation, UnionType) or get_origin(annotation) is Union:
        return all(arg in _SHOWABLE for arg in get_args(annotation))
    return annotation in _SHOWABLE


def _describe(exc: ValidationError, path: Path | None, from_file: dict[str, Any]) -> str:
    """Each problem as `VARIABLE='value': what is wrong` (or `file: key: ...` when the
    settings file gave the value)."""
    problems = []
    for error in exc.errors():
        loc = [str(part) for part in error["loc"]]
        name = loc[0] if loc else ""
        info = Settings.model_fields.get(name)
        message = error["msg"]
        if info is not None and name not in from_file:
            names = _variables(name, info)
            variable = _set_in(os.environ, names) or names[0]
            given = os.environ.get(variable)
            shown = "" if given is None or not _shows_value(info) else f"={given!r}"
            problems.append(f"{variable}{shown}: {message}")
        else:
            where = f"{path}: " if path is not None else ""
            problems.append(f"{where}{'.'.join(loc) or 'settings'}: {message}")
    return "; ".join(problems)


def load_settings(**overrides: Any) -> Settings:
    """The settings of this process: the environment over the settings file over the
    defaults, and `overrides` (command-line options) over all of them."""
    path = settings_file_path()
    from_file = _read_file(path) if path is not None else {}
    unknown = sorted(set(from_file) - set(Settings.model_fields))
    if unknown:
        raise SettingsError(f"{path}: unknown settings: {', '.join(unknown)}")
    # The file's values are defaults the environment overrides: pass only what the
    # environment does not set.
    given = {
        name: value
        for name, value in from_file.items()
        if _set_in(os.environ, _variables(name, Settings.model_fields[name])) is None
    }
    try:
        return Settings(**{**given, "settings_file": path, **overrides})
    except ValidationError as exc:
        raise SettingsError(f"invalid settings: {_describe(exc, path, given)}") from None
