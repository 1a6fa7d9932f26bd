"""The newest migration, as the server reads it at start-up without importing Alembic."""

from __future__ import annotations

from alembic.script import ScriptDirectory

from dagwright.store.db import alembic_config, head_revision


def test_head_revision_read_from_files_is_alembics_head() -> None:
    assert head_revision() == ScriptDirectory.from_config(alembic_config()).get_current_head()
