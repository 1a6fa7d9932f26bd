"""Migrations on SQLite and PostgreSQL: the schema equals the models, an older database is
upgraded with its data kept, and concurrent or repeated migrations are harmless."""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import Engine, inspect, text
from sqlmodel import SQLModel

import dagwright.store.models  # noqa: F401  (the tables compared against)
from dagwright.store.db import alembic_config, head_revision, make_engine, migrate, session
from dagwright.store.models import App, Run, Version
from support.database import DATABASES, fresh_engine

HEAD = head_revision()

pytestmark = pytest.mark.parametrize("kind", DATABASES)


def revision(engine: Engine) -> str | None:
    with engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()


def run_columns(engine: Engine) -> set[str]:
    return {column["name"] for column in inspect(engine).get_columns("runs")}


def test_migrated_schema_equals_the_models(kind: str, tmp_path: Path) -> None:
    with fresh_engine(kind, tmp_path) as engine:
        migrate(engine)
        with engine.connect() as connection:
            differences = compare_metadata(
                MigrationContext.configure(connection), SQLModel.metadata
            )
        assert differences == []
        tables = set(inspect(engine).get_table_names())
        assert tables == {*SQLModel.metadata.tables, "alembic_version"}
        assert revision(engine) == HEAD


def test_initial_revision_has_everything_but_the_cancel_column(kind: str, tmp_path: Path) -> None:
    with fresh_engine(kind, tmp_path) as engine:
        migrate(engine, "0001")
        assert revision(engine) == "0001"
        assert "cancel_requested_at" not in run_columns(engine)
        assert {"status", "replica", "finished_at"} <= run_columns(engine)
        foreign_keys = inspect(engine).get_foreign_keys("apps")
        assert [(fk["name"], fk["referred_table"]) for fk in foreign_keys] == [
            ("fk_apps_published_version", "versions")
        ]


def test_an_older_database_is_upgraded_with_its_data(kind: str, tmp_path: Path) -> None:
    with fresh_engine(kind, tmp_path) as engine:
        migrate(engine, "0001")
        stamp = "2024-05-01 10:00:00"
        with engine.begin() as connection:
            connection.execute(
                text(
                    "INSERT INTO apps (id, slug, name, description, created_at, updated_at) "
                    "VALUES ('a1', 'old-app', 'Old app', 'from 0001', :t, :t)"
                ),
                {"t": stamp},
            )
            connection.execute(
                text(
                    "INSERT INTO versions (id, app_id, number, graph, layout, note, author, "
                    "created_at) VALUES ('v1', 'a1', 1, :graph, :layout, 'first', 'ann', :t)"
                ),
                {
                    "graph": '{"nodes": [{"id": "n"}]}',
                    "layout": '{"n": {"x": 1, "y": 2}}',
                    "t": stamp,
                },
            )
            connection.execute(text("UPDATE apps SET published_version_id = 'v1'"))
            connection.execute(
                text(
                    "INSERT INTO runs (id, app_id, version_id, mode, status, inputs, replica, "
                    "created_at) VALUES ('r1', 'a1', 'v1', 'published', 'succeeded', :inputs, "
                    "'replica-1', :t)"
                ),
                {"inputs": '{"q": "hi"}', "t": stamp},
            )

        migrate(engine)

        assert revision(engine) == HEAD
        assert "cancel_requested_at" in run_columns(engine)
        with session(engine) as db:
            app, version, run = db.get(App, "a1"), db.get(Version, "v1"), db.get(Run, "r1")
            assert app is not None
            assert version is not None
            assert run is not None
            assert (app.slug, app.description, app.published_version_id) == (
                "old-app",
                "from 0001",
                "v1",
            )
            assert app.created_at == datetime(2024, 5, 1, 10, tzinfo=UTC)
            assert (version.graph, version.layout) == (
                {"nodes": [{"id": "n"}]},
                {"n": {"x": 1, "y": 2}},
            )
            assert (run.status, run.inputs, run.cancel_requested_at) == (
                "succeeded",
                {"q": "hi"},
                None,
            )
            # The new column works on the old row.
            run.cancel_requested_at = datetime(2024, 5, 2, 8, 30, tzinfo=UTC)
            db.commit()
        with session(engine) as db:
            found = db.get(Run, "r1")
            assert found is not None
            assert found.cancel_requested_at == datetime(2024, 5, 2, 8, 30, tzinfo=UTC)


def test_migrate_is_idempotent(kind: str, tmp_path: Path) -> None:
    with fresh_engine(kind, tmp_path) as engine:
        migrate(engine)
        with session(engine) as db:
            db.add(App(slug="stays", name="Stays"))
            db.commit()
        migrate(engine)
        migrate(engine)
        assert revision(engine) == HEAD
        with engine.connect() as connection:
            assert connection.execute(text("SELECT slug FROM apps")).scalars().all() == ["stays"]


def test_concurrent_migrations_take_turns(kind: str, tmp_path: Path) -> None:
    """Replicas starting together: separate engines (as separate processes would have) on one
    empty database; every one succeeds and the schema is made once."""
    with fresh_engine(kind, tmp_path) as first:
        url = first.url.render_as_string(hide_password=False)
        args = {} if kind == "sqlite" else {"options": f"-csearch_path={_schema(first)}"}
        engines = [make_engine(url, connect_args=args) for _ in range(4)]
        errors: list[BaseException] = []
        barrier = threading.Barrier(len(engines))

        def start(engine: Engine) -> None:
            try:
                barrier.wait()
                migrate(engine)
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=start, args=(engine,)) for engine in engines]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        for engine in engines:
            engine.dispose()
        assert errors == []
        assert revision(first) == HEAD
        with first.connect() as connection:
            assert connection.execute(text("SELECT count(*) FROM alembic_version")).scalar() == 1


def test_downgrade_removes_the_cancel_column_and_upgrade_restores_it(
    kind: str, tmp_path: Path
) -> None:
    with fresh_engine(kind, tmp_path) as engine:
        migrate(engine)
        with engine.begin() as connection:
            command.downgrade(alembic_config(connection), "0001")
        assert "cancel_requested_at" not in run_columns(engine)
        migrate(engine)
        assert "cancel_requested_at" in run_columns(engine)


def _schema(engine: Engine) -> str:
    with engine.connect() as connection:
        schema = connection.execute(text("SELECT current_schema()")).scalar()
    assert isinstance(schema, str)
    assert schema.startswith("t_")
    return schema


def test_a_failed_migration_leaves_nothing_behind(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_upgrade = command.upgrade

    def upgrade_then_fail(config: Any, revision: str) -> None:
        real_upgrade(config, revision)
        raise RuntimeError("power cut")

    with fresh_engine(kind, tmp_path) as engine:
        monkeypatch.setattr(command, "upgrade", upgrade_then_fail)
        with pytest.raises(RuntimeError, match="power cut"):
            migrate(engine)
        assert inspect(engine).get_table_names() == []
        monkeypatch.setattr(command, "upgrade", real_upgrade)
        migrate(engine)
        assert revision(engine) == HEAD
