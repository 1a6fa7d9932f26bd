"""Alembic migrations of the dagwright database."""
