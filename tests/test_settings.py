"""The process's settings (settings.py): every DAGWRIGHT_* variable and the settings file,
read once; the environment wins over the file; a bad value is named with what is wrong."""

from __future__ import annotations

from pathlib import Path

import pytest

from dagwright.settings import Settings, SettingsError, load_settings
from support.settings import clean_settings_environment


@pytest.fixture
def clean(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory without ./dagwright.toml and an environment without settings."""
    clean_settings_environment(monkeypatch, tmp_path)
    return tmp_path


def test_defaults_without_environment_or_file(clean: Path) -> None:
    settings = load_settings()
    assert settings.settings_file is None
    assert (settings.data_dir, settings.port, settings.threads) == (Path("data"), 8000, 128)
    assert settings.demo_sources is True
    assert settings.model_providers().is_empty
    assert settings.traces_endpoint is None


def test_values_come_from_the_environment(clean: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DAGWRIGHT_DATA_DIR", str(clean / "elsewhere"))
    monkeypatch.setenv("DAGWRIGHT_PORT", "9001")
    monkeypatch.setenv("DAGWRIGHT_DEMO_SOURCES", "0")
    monkeypatch.setenv("DAGWRIGHT_BLOCKS_PATH", f"{clean / 'a'}:{clean / 'b'}")
    monkeypatch.setenv("DAGWRIGHT_QUERY_THREADS", "3")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318/")
    settings = load_settings()
    assert settings.data_dir == clean / "elsewhere"
    assert settings.port == 9001
    assert settings.demo_sources is False
    assert settings.block_folders == [clean / "a", clean / "b"]
    assert settings.query_threads == 3
    assert settings.traces_endpoint == "http://collector:4318/v1/traces"


def test_the_settings_file_gives_values_the_environment_overrides(
    clean: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (clean / "dagwright.toml").write_text(
        'port = 9100\nthreads = 16\ndefault_provider = "local"\n\n'
        '[providers.local]\nbase_url = "http://127.0.0.1:1/v1"\n\n'
        '[sources.shop]\nkind = "sqlite"\npath = "/srv/shop.db"\n'
    )
    monkeypatch.setenv("DAGWRIGHT_PORT", "9200")
    settings = load_settings()
    assert settings.settings_file == Path("dagwright.toml")
    assert (settings.port, settings.threads) == (9200, 16)  # the environment wins
    assert settings.model_providers().get(None).base_url == "http://127.0.0.1:1/v1"
    assert settings.sources == {"shop": {"kind": "sqlite", "path": "/srv/shop.db"}}


def test_a_bad_variable_is_named_with_its_value_and_what_is_wrong(
    clean: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DAGWRIGHT_PORT", "eighty")
    monkeypatch.setenv("DAGWRIGHT_THREADS", "0")
    with pytest.raises(SettingsError) as bad:
        load_settings()
    assert bad.value.code == "invalid_settings"
    assert "DAGWRIGHT_PORT='eighty': Input should be a valid integer" in bad.value.message
    assert "DAGWRIGHT_THREADS='0': Input should be greater than or equal to 1" in bad.value.message


def test_a_bad_table_or_text_setting_is_named_without_its_value(
    clean: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A source's URL carries its password: an error names the variable, never the value.
    monkeypatch.setenv("DAGWRIGHT_SOURCES", '{"pg": "postgresql://u:hunter2@db/shop"}')
    with pytest.raises(SettingsError) as bad:
        load_settings()
    assert "DAGWRIGHT_SOURCES: " in bad.value.message
    assert "hunter2" not in bad.value.message


def test_the_environment_wins_over_the_file_under_any_of_a_settings_names(
    clean: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (clean / "dagwright.toml").write_text('otlp_endpoint = "http://from-file:4318/v1/traces"\n')
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://from-env:4318/v1/traces")
    assert load_settings().traces_endpoint == "http://from-env:4318/v1/traces"
    # Variables are read without regard to case, and so is the file's override check.
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    (clean / "dagwright.toml").write_text("port = 9100\n")
    monkeypatch.setenv("dagwright_port", "9300")
    assert load_settings().port == 9300


def test_a_bad_value_from_the_settings_file_is_named_with_the_file(
    clean: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DAGWRIGHT_SETTINGS", str(clean / "named.toml"))
    (clean / "named.toml").write_text('rate_limit = "fast"\n')
    with pytest.raises(SettingsError) as bad:
        load_settings()
    assert f"{clean / 'named.toml'}: rate_limit: Input should be a valid number" in (
        bad.value.message
    )
    monkeypatch.setenv("DAGWRIGHT_RATE_LIMIT", "50")  # the environment's value is used instead
    assert load_settings().rate_limit == 50.0


def test_a_bad_settings_file_key_is_named_with_the_file(clean: Path) -> None:
    (clean / "dagwright.toml").write_text("prot = 9000\n")
    with pytest.raises(SettingsError, match=r"dagwright.toml: unknown settings: prot"):
        load_settings()
    (clean / "dagwright.toml").write_text("port = [\n")
    with pytest.raises(SettingsError, match=r"dagwright.toml: not valid TOML"):
        load_settings()


def test_settings_are_built_directly_in_code(clean: Path) -> None:
    settings = Settings(data_dir=clean, blocks_path="")
    assert settings.data_dir == clean
    assert settings.block_folders == []
