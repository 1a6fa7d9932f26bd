"""store/db.py: where the database is, how engines are set up, sessions."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import text

from dagwright.composition import Composition
from dagwright.settings import load_settings
from dagwright.store.db import database_url, make_engine, migrate, session
from dagwright.store.models import App
from support.database import DATABASES, fresh_engine


def test_database_url_defaults_to_sqlite_in_the_data_dir(tmp_path: Path) -> None:
    assert database_url(tmp_path) == f"sqlite:///{tmp_path.resolve()}/dagwright.db"


def test_a_configured_database_url_wins(tmp_path: Path) -> None:
    configured = "postgresql+psycopg://u@db:5432/dw"
    assert database_url(tmp_path, configured) == "postgresql+psycopg://u@db:5432/dw"


def test_data_directory_from_the_environment_is_created(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "deep" / "data"
    monkeypatch.setenv("DAGWRIGHT_DATA_DIR", str(target))
    assert Composition(load_settings()).data_dir() == target
    assert target.is_dir()


def test_data_directory_defaults_to_data_under_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DAGWRIGHT_DATA_DIR", raising=False)
    monkeypatch.chdir(tmp_path)
    assert Composition(load_settings()).data_dir() == Path("data")
    assert (tmp_path / "data").is_dir()


def test_sqlite_connections_get_wal_foreign_keys_and_a_busy_timeout(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'x.db'}")
    try:
        with engine.connect() as connection:
            pragma = {
                name: connection.exec_driver_sql(f"PRAGMA {name}").scalar()
                for name in ("journal_mode", "synchronous", "foreign_keys", "busy_timeout")
            }
    finally:
        engine.dispose()
    # synchronous: 1 is NORMAL.
    assert pragma == {
        "journal_mode": "wal",
        "synchronous": 1,
        "foreign_keys": 1,
        "busy_timeout": 5000,
    }


def test_postgresql_engine_pings_its_pooled_connections() -> None:
    engine = make_engine("postgresql+psycopg://u@db.invalid:5432/dw")
    assert engine.pool._pre_ping is True  # type: ignore[attr-defined]
    assert engine.pool.size() == 10  # type: ignore[attr-defined]
    engine.dispose()


@pytest.mark.parametrize("kind", DATABASES)
def test_session_objects_stay_readable_after_it_closes(kind: str, tmp_path: Path) -> None:
    with fresh_engine(kind, tmp_path) as engine:
        migrate(engine)
        with session(engine) as db:
            app = App(slug="kept", name="Kept")
            db.add(app)
            db.commit()
        # Detached now, yet every column is still loaded (no expiry on commit).
        assert (app.slug, app.name, app.description) == ("kept", "Kept", "")
        with engine.connect() as connection:
            assert connection.execute(text("SELECT name FROM apps")).scalar() == "Kept"


@pytest.mark.parametrize("kind", DATABASES)
def test_session_rolls_back_when_left_with_an_error(kind: str, tmp_path: Path) -> None:
    with fresh_engine(kind, tmp_path) as engine:
        migrate(engine)

        def fail_after_a_write() -> None:
            with session(engine) as db:
                db.add(App(slug="gone", name="Gone"))
                db.flush()
                raise RuntimeError("stop")

        with pytest.raises(RuntimeError, match="stop"):
            fail_after_a_write()
        with engine.connect() as connection:
            assert connection.execute(text("SELECT count(*) FROM apps")).scalar() == 0
